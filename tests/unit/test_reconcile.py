"""Client beside server for one request: the TTFT gap and the two decode rates."""

from __future__ import annotations

import pytest

from tui.core.measure.reconcile import TTFT_GAP_NAME, reconcile
from tui.core.measure.records import RequestTiming, ServerSplit


def timing(split: ServerSplit | None) -> RequestTiming:
    # First chunk at 0.520 s, then 10 more 50 ms apart: client decode = 10 / 0.5 s = 20 tok/s.
    offsets = tuple(0.520 + 0.05 * i for i in range(11))
    return RequestTiming(ok=True, t_sent_unix=0.0, token_offsets_s=offsets, prompt_tokens=100, output_tokens=11,
                         server_split=split)


def test_gap_is_client_ttft_minus_server_prompt_time_and_rates_side_by_side():
    both = reconcile(timing(ServerSplit(prefill_s=0.5, decode_s=0.5, prompt_tokens=100, output_tokens=11, cached_tokens=3)))
    assert both.client_ttft_s == pytest.approx(0.520)
    assert both.server_prompt_s == 0.5
    assert both.ttft_gap_s == pytest.approx(0.020)
    assert both.client_decode_tok_s == pytest.approx(20.0)
    # vLLM's generation_time_ms and llama.cpp's predicted_ms run first token → last: 10 gaps for 11 tokens.
    assert both.server_decode_tok_s == pytest.approx(20.0)
    assert both.decode_ratio == pytest.approx(1.0)
    assert both.server_cached_tokens == 3
    assert both.to_json()["ttft_gap_is"] == TTFT_GAP_NAME == "network + queue + first decode step"


def test_no_server_split_means_nothing_to_reconcile_and_missing_sides_stay_none():
    assert reconcile(timing(None)) is None
    decode_only = reconcile(timing(ServerSplit(decode_s=0.5, output_tokens=11)))
    assert decode_only.server_prompt_s is None and decode_only.ttft_gap_s is None
    assert decode_only.decode_ratio == pytest.approx(1.0)


def test_ollama_eval_duration_covers_every_token_so_its_rate_divides_all_of_them():
    ollama = reconcile(timing(ServerSplit(decode_s=0.5, output_tokens=11, decode_spans_first_token=True)))
    assert ollama.server_decode_tok_s == pytest.approx(22.0)


def test_vllm_ttft_splits_into_connect_network_queue_and_prefill_with_its_first_step():
    split = ServerSplit(prefill_s=0.400, decode_s=0.5, output_tokens=11, queue_s=0.080, prefill_includes_first_step=True)
    both = reconcile(timing(split))  # client TTFT 0.520 s
    assert both.gap_is == "network + queue" and both.to_json()["ttft_gap_is"] == "network + queue"
    assert both.network_s == pytest.approx(0.040)
    assert both.ttft_parts(0.002) == pytest.approx(
        {"connect_s": 0.002, "network_s": 0.040, "queue_s": 0.080, "prefill_first_step_s": 0.400})


def test_without_the_servers_queue_time_ttft_has_no_parts():
    assert reconcile(timing(ServerSplit(prefill_s=0.5, decode_s=0.5, output_tokens=11))).ttft_parts(0.002) is None
