"""The UI marks a request timed in bursts as delivery, not generation, and keeps it out of its figures."""

from __future__ import annotations

from tui.app.widgets.load_dial import DialState, describe
from tui.core.measure.delivery import Guard
from tui.core.view.lane_figures import figures_line
from tui.core.measure.records import RequestTiming, ServerSplit
from tui.core.measure.load_steps import LoadProgress


def timing(offsets) -> RequestTiming:
    return RequestTiming(ok=True, t_sent_unix=0.0, token_offsets_s=tuple(offsets), prompt_tokens=200,
                         output_tokens=len(offsets))


def test_the_figures_line_says_delivery_and_shows_no_itl_for_the_clumped_request():
    steady = timing([0.02 + 0.005 * i for i in range(64)])
    clumped = timing([0.5 + 30e-6 * i for i in range(64)])  # a whole answer read at once
    shown = Guard().flagged([steady, clumped])
    line = figures_line(shown, None)  # the newest, the clumped one, selected
    assert "\ndelivery, not generation: 63 of 63 gaps under 0.2 ms" in line
    assert "ITL p50 – p99 –" in line  # its gaps time the delivery: not the clumped 0.03 ms
    steady_line = figures_line(shown, None, back=1)  # the steady lane selected
    assert "ITL p50 5.0 ms" in steady_line and "delivery" not in steady_line
    assert "delivery" not in figures_line(shown[:1], None)


def test_the_load_dial_counts_requests_left_out_as_delivery():
    progress = LoadProgress(planned=None, sent=10, finished=9, failed=0, in_flight=1, waiting=0, elapsed_s=5.0, recent_rps=2.0)
    text = describe(DialState(running=True, rate=2.0, concurrency=4, progress=progress, itl_p50_s=0.005, bursts=3))
    assert "3 timed delivery, not generation, left out" in text
    assert "left out" not in describe(DialState(running=True, rate=2.0, concurrency=4, progress=progress))


def test_the_figures_line_splits_ttft_into_the_servers_parts_where_vllm_gives_them():
    split = ServerSplit(prefill_s=0.0500, decode_s=0.315, output_tokens=64, queue_s=0.0031, prefill_includes_first_step=True)
    with_parts = RequestTiming(ok=True, t_sent_unix=0.0, token_offsets_s=tuple(0.0600 + 0.005 * i for i in range(64)),
                               prompt_tokens=200, output_tokens=64, server_split=split)
    line = figures_line([with_parts], None)
    assert "\nTTFT = network 6.9 + queue 3.1 + prefill and first step 50.0 ms (the server's clock)" in line
    assert "network" not in figures_line([timing([0.06 + 0.005 * i for i in range(64)])], None)
