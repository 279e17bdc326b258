"""The traffic view's arithmetic: lanes of queue, prefill and decode from spans alone, the slowest named with the
phase that made them slow, phasetop's sends beside their spans, percentiles beside the server's histograms, and a
window as a run that compares."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from tests.otlp import record
from tui.core.measure.records import RequestTiming
from tui.core.runs.run_record import compare_runs, new_run
from tui.core.telemetry.readings import HistogramQuantiles
from tui.core.view.timeline import ALIGNED, WALL_CLOCK
from tui.core.view.traffic import (DECODE, EMPTY, OUTSIDE, PREFILL, QUEUE, hidden_line, own_beside_server, own_line,
                                   phase_spans, phase_table, run_requests, served_text, slowest_lines, traffic_layout,
                                   windows_line)

T0 = 1_760_000_000.0


def test_a_lane_is_outside_then_queue_then_prefill_to_the_first_token_then_decode():
    # vLLM: TTFT 0.5 s = 0.1 s in its API server, 0.25 s queued, 0.15 s prefill; then 1 s of decode.
    r = record(queue_s=0.25, prefill_s=0.15, ttft_s=0.5, decode_s=1.0, e2e_s=1.55)
    spans = phase_spans(r)
    assert [phase for phase, _, _ in spans] == [OUTSIDE, QUEUE, PREFILL, DECODE]
    assert [(round(a, 9), round(b, 9)) for _, a, b in spans] == [(0.0, 0.1), (0.1, 0.35), (0.35, 0.5), (0.5, 1.5)]
    [lane] = traffic_layout([r], width=30, rows=5, view=ALIGNED).lanes
    assert lane.cells == (OUTSIDE,) * 2 + (QUEUE,) * 5 + (PREFILL,) * 3 + (DECODE,) * 20


def test_on_the_wall_clock_lanes_start_at_their_arrival_and_a_short_prefill_still_shows():
    first = record("a", T0, queue_s=0.0, prefill_s=0.001, ttft_s=0.001, decode_s=1.0, e2e_s=1.001)
    later = record("b", T0 + 1.0, queue_s=0.0, prefill_s=0.001, ttft_s=0.001, decode_s=1.0, e2e_s=1.001)
    drawn = traffic_layout([later, first], width=20, rows=5, view=WALL_CLOCK)
    assert [lane.record.request_id for lane in drawn.lanes] == ["a", "b"]  # oldest arrival first
    assert drawn.t0_unix == T0 and abs(drawn.span_s - 2.001) < 1e-6  # wall-clock floats near 1.76e9
    a, b = (lane.cells for lane in drawn.lanes)
    assert a[0] == PREFILL and a[9] == DECODE and a[-1] == EMPTY  # 1 ms of prefill is one cell, not none
    assert b[:9] == (EMPTY,) * 9 and b[9] == PREFILL and b[-1] == DECODE


def test_only_the_newest_fit_and_the_rest_are_counted():
    records = [record(str(i), T0 + i) for i in range(12)]
    drawn = traffic_layout(records, width=40, rows=5)
    assert [lane.record.request_id for lane in drawn.lanes] == ["7", "8", "9", "10", "11"] and drawn.hidden == 7


def test_the_slowest_are_named_with_the_phase_that_made_them_slow():
    usual = [record(f"u{i}", T0 + i, queue_s=0.001, prefill_s=0.02, ttft_s=0.021, prompt_tokens=200) for i in range(9)]
    queued = record("queued", queue_s=1.8, prefill_s=0.02, ttft_s=2.1)
    long_prompt = record("long", queue_s=0.0, prefill_s=0.9, ttft_s=0.95, prompt_tokens=6000)
    shared = record("shared", queue_s=0.0, prefill_s=0.5, ttft_s=0.5, prompt_tokens=300)  # 600 tok/s, not 10,000
    api = record("api", queue_s=0.0, prefill_s=0.02, ttft_s=0.4)
    lines = slowest_lines([*usual, queued, long_prompt, shared, api], count=4)
    assert lines[0] == "queued: queue 1.80 s of TTFT 2.10 s: capacity (it waited for a place in the batch or the KV cache)"
    assert lines[1] == "long: prefill 900 ms of TTFT 950 ms: 6,000-token prompt"
    assert lines[2].startswith("shared: prefill 500 ms of TTFT 500 ms: 300-token prompt at 600 tok/s, under half")
    assert lines[3].startswith("api: 380 ms of TTFT 400 ms outside the engine: the API server")


def test_a_request_id_is_shown_as_text_and_phasetops_own_marked():
    hostile = replace(record("cmpl-\x1b[31mred\n-0"), sent_by_phasetop=True)
    [line] = slowest_lines([hostile], count=1)
    assert "\x1b" not in line and "\n" not in line and "(yours)" in line


def test_phasetops_sends_sit_beside_their_spans_and_the_difference_is_the_network_and_client():
    spans = [record("cmpl-a-0", ttft_s=0.100), record("cmpl-b-0", ttft_s=0.200), record("cmpl-other-0")]
    timings = [RequestTiming(True, T0, (0.103, 0.11), completion_id="cmpl-a"),
               RequestTiming(True, T0, (0.209, 0.22), completion_id="cmpl-b"),
               RequestTiming(True, T0, (0.3,), completion_id="cmpl-never-served")]
    pairs = own_beside_server(spans, timings)
    assert [(r.request_id, t.completion_id) for r, t in pairs] == [("cmpl-a-0", "cmpl-a"), ("cmpl-b-0", "cmpl-b")]
    assert own_line(spans, pairs) == ("yours: 2 of 3 served · client TTFT − server TTFT (the network and the client): "
                                      "p50 6 ms, max 9 ms")


def test_a_send_of_phasetops_with_no_first_token_is_counted_but_not_differenced():
    spans = [record("cmpl-a-0", ttft_s=0.100)]
    pairs = [(spans[0], RequestTiming(False, T0, (), completion_id="cmpl-a", error="cut"))]
    assert own_line(spans, pairs) == "yours: 1 of 1 served · none with a first token on the client's side"


def test_each_phase_beside_the_servers_histogram_with_its_bounds_said():
    records = [record(str(i), queue_s=0.001 * i) for i in range(1, 101)]
    queue = HistogramQuantiles(p50=0.15, p90=0.27, p99=0.297, mean=0.1, n=100, n_total=100, first_le=0.3, last_le=None,
                               edges={"p50": "first", "p90": "first", "p99": "first"})
    rows = {row[0]: row for row in phase_table(records, {"queue_s": queue})}
    assert rows["queue"] == ("queue", "50 ms", "90 ms", "99 ms", "100", "≤ 300 ms", "≤ 300 ms", "≤ 300 ms")
    assert rows["prefill"][5:] == ("–", "–", "–")  # no histogram read: nothing beside it


def test_a_window_saved_as_a_run_compares_on_ttft_tpot_and_e2e():
    def window(ttft_s: float) -> dict:
        records = [record(str(i), T0 + i, ttft_s=ttft_s * (1 + 0.01 * (i % 5)), queue_s=0.0, prefill_s=ttft_s * 0.9,
                          decode_s=0.63, completion_tokens=64) for i in range(40)]
        return new_run("traffic", {"source": "phasetop traces"}, {"service": "vllm"}, run_requests(records), {}, _now(), _now())

    requests = run_requests([record(completion_tokens=64, decode_s=0.63)])
    assert abs(requests[0]["tpot_s"] - 0.01) < 1e-12 and abs(requests[0]["decode_tok_s"] - 100) < 1e-9
    comparison = compare_runs(window(0.2), window(0.1))
    ttft = next(f for f in comparison["figures"] if f["label"] == "TTFT p50")
    assert ttft["verdict"] == "better"
    itl = next(f for f in comparison["figures"] if f["label"] == "ITL p50")
    assert itl["verdict"] == "not_enough_data"  # spans carry no per-token gaps: said, not guessed


def _now() -> datetime:
    return datetime(2026, 3, 1, tzinfo=UTC)


def test_the_window_says_how_many_requests_and_the_time_they_cover_in_the_singular_too():
    assert served_text([]) == "no request served yet"
    assert served_text([record("a", T0, e2e_s=1.25)]) == "1 request served over 1.25 s, arrival to answer"
    two = [record("a", T0), record("b", T0 + 30.0, e2e_s=2.0)]  # first arrival T0 to last answer T0 + 32 s
    assert served_text(two) == "2 requests served over 32.00 s, first arrival to last answer"
    assert hidden_line(1) == "↑ 1 older request not drawn (no room); every figure below counts them"
    assert hidden_line(29).startswith("↑ 29 older requests not drawn")


def test_each_side_of_the_phase_table_names_its_window_and_why_it_reads_a_dash():
    records = [record(str(i), T0 + i) for i in range(53)]
    read = {"ttft_s": HistogramQuantiles(0.01, 0.05, 0.1, 0.02, 12, 40, None, None)}
    line = windows_line(records, read, 30.0)
    assert line == "spans: 53 requests, 53.25 s · /metrics: its last 30 s, 12 requests", line
    idle = {"ttft_s": HistogramQuantiles(None, None, None, None, 0, 40, None, None)}
    assert windows_line(records, idle, 30.0).endswith("/metrics: no request in its last 30 s")
    assert windows_line([], {}, None) == "spans: none yet · /metrics: not read yet"
    assert len(windows_line(records, idle, 30.0)) <= 78  # one row at 80 columns
