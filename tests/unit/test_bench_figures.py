"""`vllm bench serve`'s figures from fixed request timings: what counts, what is pooled, goodput."""

from __future__ import annotations

import pytest

from tui.core.measure.bench import bench_figures, peak_concurrency
from tui.core.measure.records import RequestTiming


def timing(offsets, sent=0.0, prompt=100, output=None, ok=True) -> RequestTiming:
    return RequestTiming(ok=ok, t_sent_unix=sent, token_offsets_s=tuple(offsets), prompt_tokens=prompt,
                         output_tokens=len(offsets) if output is None else output)


FAST = timing([0.1, 0.11, 0.12, 0.13], sent=0.0)          # TTFT 100 ms, TPOT 10 ms
SLOW = timing([0.5, 0.54, 0.58], sent=0.05)               # TTFT 500 ms, TPOT 40 ms
SINGLE = timing([0.2], sent=0.3)                          # one token: no TPOT, no ITL
FAILED = timing([0.1, 0.2], sent=0.4, ok=False)


def test_counts_tokens_and_throughputs():
    f = bench_figures([FAST, SLOW, SINGLE, FAILED], duration_s=2.0)
    assert (f["completed"], f["failed"]) == (3, 1)
    assert f["total_input_tokens"] == 300
    assert f["total_output_tokens"] == 4 + 3 + 1
    assert f["request_throughput"] == pytest.approx(1.5)
    assert f["output_throughput"] == pytest.approx(4.0)
    assert f["total_token_throughput"] == pytest.approx(154.0)
    assert f["request_goodput"] is None  # no SLO given


def test_latency_summaries_follow_vllm():
    f = bench_figures([FAST, SLOW, SINGLE, FAILED], duration_s=2.0)
    assert f["ttft_s"]["n"] == 3 and f["ttft_s"]["p50"] == pytest.approx(0.2)
    assert f["tpot_s"]["n"] == 2  # the one-token request has no TPOT
    assert f["tpot_s"]["mean"] == pytest.approx((0.01 + 0.04) / 2)
    assert f["itl_s"]["n"] == 3 + 2  # every gap of every completed request, pooled
    assert f["itl_s"]["mean"] == pytest.approx((3 * 0.01 + 2 * 0.04) / 5)
    assert f["e2el_s"]["mean"] == pytest.approx((0.13 + 0.58 + 0.2) / 3)


def test_a_request_that_ended_well_without_a_token_is_not_completed():
    empty = RequestTiming(ok=True, t_sent_unix=0.0, output_tokens=0)
    f = bench_figures([empty, FAST], duration_s=1.0)
    assert (f["completed"], f["failed"]) == (1, 1)


@pytest.mark.parametrize(
    ("slo_ttft_s", "slo_tpot_s", "good"),
    [
        (0.2, None, 2),      # FAST and SINGLE
        (None, 0.02, 2),     # FAST, and SINGLE whose TPOT counts as 0
        (0.2, 0.005, 1),     # only SINGLE
        (1.0, 0.04, 3),      # at the SLO is within it
        (0.05, None, 0),
    ],
)
def test_goodput(slo_ttft_s, slo_tpot_s, good):
    f = bench_figures([FAST, SLOW, SINGLE, FAILED], duration_s=2.0, slo_ttft_s=slo_ttft_s, slo_tpot_s=slo_tpot_s)
    assert f["request_goodput"] == pytest.approx(good / 2.0)


def test_peak_concurrency_is_a_sweep_over_half_open_intervals():
    # FAST runs 0–0.13, SLOW 0.05–0.63, SINGLE 0.3–0.5: at most two at once.
    assert peak_concurrency([FAST, SLOW, SINGLE]) == 2
    back_to_back = [timing([0.1], sent=0.0), timing([0.1], sent=0.1)]
    assert peak_concurrency(back_to_back) == 1


def test_no_duration_gives_no_rates():
    f = bench_figures([], duration_s=0.0)
    assert f["completed"] == 0 and f["request_throughput"] is None and f["ttft_s"]["n"] == 0
