"""Speculation read from /metrics: vLLM's spec_decode counters over the window, llama.cpp's at zero read as none."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.core.measure.records import RequestTiming
from tui.core.state.lab import Lab
from tui.core.state.live import LiveSession
from tui.core.state.main_state import MainState, Publish
from tui.core.state.server_watch import ServerWatch
from tui.core.state.tuning_loop import TuningLoop
from tui.core.telemetry.metric_names import read_scrape
from tui.core.telemetry.promstats import build_snapshot
from tui.core.telemetry.speculation import ceiling_text
from tui.core.view.lane_figures import figures_line

FIXTURES = Path(__file__).parent.parent / "fixtures" / "metrics"


def page(drafts: int, accepted_by_position: tuple[int, ...], k: int = 3) -> str:
    labels = 'engine="0",model_name="m"'
    lines = [f"vllm:spec_decode_num_drafts_total{{{labels}}} {drafts}",
             f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {k * drafts}",
             f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {sum(accepted_by_position)}"]
    lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} {n}'
              for i, n in enumerate(accepted_by_position)]
    return "\n".join(lines) + "\n"


def test_the_window_gives_acceptance_tokens_a_step_and_each_position():
    before = read_scrape(page(100, (80, 50, 20)), 0.0, 0.0)
    after = read_scrape(page(300, (80 + 180, 50 + 120, 20 + 60)), 1.0, 1.0)
    spec = build_snapshot(before, after).speculation
    assert spec.over == "window" and spec.drafts == 200
    assert spec.acceptance_rate == pytest.approx(360 / 600)
    assert spec.mean_accepted_length == pytest.approx(1 + 360 / 200)
    assert spec.position_rates == pytest.approx((0.9, 0.6, 0.3))
    assert build_snapshot(before, after).to_json()["speculation"]["num_speculative_tokens"] == 3
    assert spec.line() == "speculating 3 a step, 60% accepted, 2.80 tokens a step, by position 90 60 30 %"


def test_an_idle_window_says_the_totals_since_start():
    reading = read_scrape(page(100, (80, 50, 20)), 0.0, 0.0)
    spec = build_snapshot(reading, read_scrape(page(100, (80, 50, 20)), 1.0, 1.0)).speculation
    assert spec.over == "since start" and spec.mean_accepted_length == pytest.approx(2.5)


def test_a_server_that_never_drafted_does_not_speculate():
    llamacpp = (FIXTURES / "llamacpp-b11434.txt").read_text()
    assert "llamacpp:spec_decode_num_drafts_total 0" in llamacpp
    assert build_snapshot(None, read_scrape(llamacpp, 0.0, 0.0)).speculation is None
    assert build_snapshot(None, read_scrape("vllm:num_requests_running 1\n", 0.0, 0.0)).speculation is None


def test_the_ceiling_of_a_speculating_server_is_the_bandwidths_times_its_tokens_a_step():
    session = LiveSession(ServerWatch(ceiling=(209.0, 131072.0, 16e9)))
    assert session.server.decode_ceiling_tok_s == 209.0 and session.server.speculation_factor is None
    session.server.scraped(build_snapshot(None, read_scrape(page(100, (80, 50, 20)), 0.0, 0.0)))
    assert session.server.speculation_factor == pytest.approx(2.5)
    assert session.server.decode_ceiling_tok_s == pytest.approx(522.5)
    assert session.server.header.ceiling_factor == pytest.approx(2.5)
    assert ceiling_text(522.5, 2.5) == "ceiling 209 × 2.50 tokens a step = 522 tok/s"
    assert ceiling_text(209.0, None) == "ceiling 209 tok/s"
    stream = RequestTiming(ok=True, t_sent_unix=0.0, token_offsets_s=tuple(0.01 + 0.01 * i for i in range(11)),
                           output_tokens=21, tokens_per_chunk=(1, *[2] * 10))
    line = figures_line([stream], session.server.decode_ceiling_tok_s, ceiling_factor=session.server.speculation_factor)
    assert "decode 200.0 tok/s = 38% of the 522 tok/s ceiling (209 × 2.50 tokens a step: speculation)" in line
    assert "ITL p50 5.0 ms p99 5.0 ms per token (1.91 tokens a chunk, its gap spread over them)" in line


def test_a_stream_flagged_only_for_beating_the_ceiling_is_lifted_once_the_servers_speculation_is_read():
    # The first speculating requests end before a scrape has seen a draft: 500 tok/s against the bare 209 ceiling
    # looks like delivery; the next scrape says 2.5 tokens a step (a 522 tok/s ceiling) and the flag goes.
    session = LiveSession(ServerWatch(ceiling=(209.0, 131072.0, 16e9)))
    fast = session.send(2)
    faster = fast + 1
    for request_id in (fast, faster):
        session.started(request_id, "short 200", 0.0, 200)
    chunks = tuple(0.01 + 0.005 * i for i in range(41))
    speculated = RequestTiming(ok=True, t_sent_unix=0.0, token_offsets_s=chunks, output_tokens=101,
                               tokens_per_chunk=(1, *[2, 3] * 20))  # 500 tok/s
    beyond = RequestTiming(ok=True, t_sent_unix=0.0, token_offsets_s=chunks, output_tokens=241,
                           tokens_per_chunk=(1, *[6] * 40))  # 1,200 tok/s: past even the speculating ceiling
    session.completed(fast, speculated)
    session.completed(faster, beyond)
    assert [bool(t.burst) for t in session.publish().timings] == [True, True]
    state = MainState(session, Lab("http://h:8000", saving=False), TuningLoop([]))
    assert Publish() in state.scraped(build_snapshot(None, read_scrape(page(100, (80, 50, 20)), 0.0, 0.0)))
    kept = session.publish().timings
    assert kept[0].burst is None, "the ceiling × 2.5 tokens a step allows it"
    assert "above the bandwidth ceiling of 522" in kept[1].burst
