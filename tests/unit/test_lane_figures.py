"""The selected lane: where the arrows move it, where a send puts it, and what its figures and diagnosis say."""

from __future__ import annotations

import pytest

from tui.core.view.diagnosis import Finding
from tui.core.view.lane_figures import (EMPTY_LINE, NEWEST, after_send, diagnosis_text, figures_line, moved,
                                   selected_index, ttft_parts)
from tui.core.measure.records import RequestTiming, ServerSplit


def timing(ttft_s: float, gap_s: float = 0.005, tokens: int = 64, prompt: int = 200, **kw) -> RequestTiming:
    offsets = tuple(ttft_s + gap_s * i for i in range(tokens))
    return RequestTiming(ok=True, t_sent_unix=0.0, token_offsets_s=offsets, prompt_tokens=prompt,
                         output_tokens=tokens, **kw)


@pytest.mark.parametrize(("back", "step", "count", "expected"), [
    (0, 1, 2, 1),   # up: the older lane
    (1, 1, 2, 1),   # the oldest stays
    (1, -1, 2, 0),  # down: the newer
    (0, -1, 2, 0),  # the newest stays
    (5, 0, 3, 2),   # kept among the lanes left
    (3, 1, 0, NEWEST),
])
def test_arrows_move_the_selection_among_the_lanes(back, step, count, expected):
    assert moved(back, step, count) == expected


def test_a_new_send_selects_the_newest_and_otherwise_the_selection_stays():
    assert after_send(1, new_send=True, count=3) == NEWEST
    assert after_send(1, new_send=False, count=3) == 1
    assert after_send(4, new_send=False, count=2) == 1


def test_the_selected_index_counts_back_from_the_newest():
    assert selected_index(3, 0) == 2 and selected_index(3, 2) == 0 and selected_index(3, 9) == 0
    assert selected_index(0, 0) is None


def test_the_figures_name_the_selected_lane_and_show_its_own_numbers():
    short, long = timing(0.008, prompt=200), timing(0.072, gap_s=0.0049, prompt=2000)
    labels = ["short 200", "long 2000"]
    newest = figures_line([short, long], 209.0, NEWEST, labels)
    assert newest.startswith("long 2000: TTFT 72.0 ms")
    assert "prefill 27,778 tok/s (client)" in newest
    assert f"decode {long.decode_tok_s:,.1f} tok/s = {long.decode_tok_s / 209:.0%} of the 209 tok/s ceiling" in newest
    assert "ITL p50 4.9 ms p99 4.9 ms" in newest and "tokens 2,000 in → 64 out" in newest
    older = figures_line([short, long], 209.0, 1, labels)
    assert older.startswith("short 200: TTFT 8.0 ms") and "ITL p50 5.0 ms" in older and "tokens 200 in" in older
    assert figures_line([], None) == EMPTY_LINE


def test_a_lane_in_prefill_or_failed_says_so():
    waiting = RequestTiming(ok=True, t_sent_unix=0.0, prompt_tokens=2000)
    assert figures_line([waiting], None, labels=["long 2000"]) == \
        "long 2000: TTFT … (waiting for its first token)   tokens 2,000 in → 0 out"
    failed = RequestTiming(ok=False, t_sent_unix=0.0, prompt_tokens=200, error="boom")
    assert figures_line([failed], None, labels=["short 200"]).startswith("short 200: failed before its first token")


def test_ttft_splits_as_the_server_says():
    vllm = ServerSplit(prefill_s=0.0500, decode_s=0.315, output_tokens=64, queue_s=0.0031, prefill_includes_first_step=True)
    assert ttft_parts(timing(0.060, server_split=vllm)) == \
        "TTFT = network 6.9 + queue 3.1 + prefill and first step 50.0 ms (the server's clock)"
    llamacpp = ServerSplit(prefill_s=0.040, decode_s=0.3, prompt_tokens=200, output_tokens=64)
    parts = ttft_parts(timing(0.060, server_split=llamacpp))
    assert parts is not None and parts.startswith("TTFT = prefill 40.0 + ") and parts.endswith(" 20.0 ms (the server's clock)")
    assert ttft_parts(timing(0.060)) is None
    line = figures_line([timing(0.060, server_split=llamacpp)], None)
    assert "(server)" in line and "\nTTFT = prefill 40.0" in line


def test_the_diagnosis_names_its_request_and_waits_for_it_to_end():
    finding = Finding("decode", "205 tok/s is 98% of the bandwidth ceiling", "bandwidth-bound: quantize")
    assert diagnosis_text("long 2000", [finding], in_flight=False) == \
        "long 2000: decode 205 tok/s is 98% of the bandwidth ceiling → bandwidth-bound: quantize"
    assert diagnosis_text("long 2000", [finding], in_flight=True) == "long 2000: in flight"
    assert diagnosis_text("long 2000", [], in_flight=False) == ""


def test_a_kv_transfer_is_named_as_its_share_of_ttft_with_its_bytes():
    from tui.core.view.lane_figures import transfer_text

    moved = timing(0.100, server_split=ServerSplit(kv_transfer_s=0.011, kv_transfer_bytes=512_000_000))
    text = transfer_text(moved)
    assert text == ("KV transfer 11.0 ms of TTFT 100.0 ms (11%), 512 MB from the prefill worker to the decode worker "
                    "(the server's clock)")
    assert text in figures_line([moved], None)
    assert transfer_text(timing(0.100)) is None and "KV transfer" not in figures_line([timing(0.100)], None)
