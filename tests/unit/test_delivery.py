"""The measurement guard: clumped arrivals are delivery, not generation, and stay out of the summary."""

from __future__ import annotations

from dataclasses import replace

from tui.core.measure.delivery import Guard, burst_line, burst_reason
from tui.core.measure.records import RequestTiming, ServerSplit, summarize_requests


def timing(offsets, output_tokens=None, split=None) -> RequestTiming:
    return RequestTiming(ok=True, t_sent_unix=0.0, token_offsets_s=tuple(offsets),
                         output_tokens=output_tokens or len(offsets), server_split=split)


def steady(n=64, ttft=0.02, itl=0.005):
    return [ttft + itl * i for i in range(n)]


def test_a_steady_stream_is_generation():
    assert burst_reason(timing(steady())) is None
    # A third of the gaps back to back (real vLLM on a loaded 2-core box), the median still a decode step.
    uneven = [0.02 + 0.005 * (i - i // 3) + 50e-6 * (i // 3) for i in range(64)]
    assert burst_reason(timing(uneven)) is None


def test_a_whole_answer_in_one_read_is_delivery():
    # A starved client: TTFT equals E2E, every chunk of one read stamped alike.
    reason = burst_reason(timing([0.9] * 64))
    assert reason and "63 of 63 gaps under 0.2 ms" in reason


def test_a_client_that_paused_over_nearly_every_gap_timed_nothing_of_the_server():
    starved = replace(timing(steady(n=16, itl=0.06)), client_gaps=tuple(range(13)))
    assert burst_reason(starved) == "13 of 15 gaps were the client's own pauses: too few left to time the server"
    # A short answer with two pauses of five gaps: its three server gaps are still a decode step apart.
    assert burst_reason(replace(timing(steady(n=6, itl=0.06)), client_gaps=(0, 3))) is None
    assert burst_reason(replace(starved, client_gaps=tuple(range(11)))) is None  # four of the server's gaps: judged


def test_a_client_paused_mid_stream_shows_one_big_clump():
    # 300 ms paused at token 20 of 5 ms tokens: the 60 written meanwhile are read back to back, each HTTP
    # chunk stamped 50 µs after the last (measured on real vLLM: a SIGSTOP'd client shows exactly this).
    resumed = 0.02 + 0.005 * 19 + 0.3
    clump = [resumed + 50e-6 * i for i in range(60)]
    offsets = steady(20) + clump + [clump[-1] + 0.005 * i for i in range(1, 120)]
    assert sum(1 for a, b in zip(offsets, offsets[1:]) if b - a < 2e-4) < 0.5 * (len(offsets) - 1)  # not by the share
    reason = burst_reason(timing(offsets))
    assert reason and "60 of 199 chunks arrived back to back" in reason
    # A short hiccup (8 chunks at once in 200) is jitter, not a burst.
    hiccup = steady(20) + clump[:8] + [clump[7] + 0.005 * i for i in range(1, 172)]
    assert burst_reason(timing(hiccup)) is None


def test_faster_than_the_server_says_is_delivery():
    # The client saw 1 ms gaps; the server's own clock says 63 gaps took 0.63 s (10 ms each).
    split = ServerSplit(decode_s=0.63, output_tokens=64)
    reason = burst_reason(timing(steady(itl=0.001), split=split))
    assert reason and "by the server's own clock" in reason
    assert burst_reason(timing(steady(itl=0.0095), split=split)) is None  # within jitter of the server


def test_above_the_bandwidth_ceiling_is_delivery():
    fast = timing(steady(itl=0.001))  # 1,000 tok/s
    assert burst_reason(fast, ceiling_tok_s=209) and "ceiling" in burst_reason(fast, ceiling_tok_s=209)
    assert burst_reason(fast, ceiling_tok_s=2000) is None


def test_the_guards_ceiling_is_the_bandwidths_times_the_tokens_a_step_and_judges_a_fresh_servers_first_as_cold():
    fast = timing(steady(itl=0.001))  # 1,000 tok/s: above 209, under 209 × 5
    guard = Guard(fresh=True, bandwidth_ceiling_tok_s=209.0)
    assert guard.flagged([fast])[0].burst and guard.ceiling_tok_s == 209.0
    speculating = guard.speculating(5.0)
    assert speculating.ceiling_tok_s == 1045.0 and speculating.flagged([fast])[0].burst is None
    assert speculating.speculating(None) == speculating, "no word from the server: the last one stands"
    first, second = speculating.judged([timing(steady()), timing(steady())])
    assert first.cold and not second.cold
    assert not Guard(fresh=False).judged([timing(steady()), timing(steady())])[0].cold


def test_flagged_requests_stay_out_of_the_summary_and_are_counted():
    good, clumped = timing(steady()), timing([0.9] * 64)
    flagged = Guard().flagged([good, clumped])
    assert flagged[0].burst is None and flagged[1].burst
    summary = summarize_requests(flagged)
    assert summary["bursts_excluded"] == 1
    assert summary["ttft_s"]["n"] == 1 and summary["decode_tok_s"]["p50"] == good.decode_tok_s
    assert flagged[1].to_json()["burst"] == flagged[1].burst
    assert burst_line(flagged).startswith("1 of 2 requests timed delivery, not generation")
    assert burst_line([good]) is None
