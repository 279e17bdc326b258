"""Bounded memory: an endless load keeps figures over every request and a fixed sample of the raw ones."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from tui.core.measure.aggregates import EXACT_VALUES, RELATIVE_ACCURACY, Distribution, EndlessRecord, Reservoir
from tui.core.measure.bench import bench_figures
from tui.core.measure.client_load import busy_line
from tui.core.measure.records import RequestTiming, summarize_requests
from tui.core.runs.run_record import new_run, run_header
from tui.core.runs.sessions import KEEP_SESSION_REQUESTS, Session, session_run
from tui.core.measure.stats import summarize

T0 = 1.7e9


def synthetic(n: int, seed: int = 7, tokens: int = 3) -> list[RequestTiming]:
    """`n` requests sent 10 ms apart, each a TTFT then `tokens` − 1 gaps; one in fifty failed."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if i % 50 == 49:
            out.append(RequestTiming(ok=False, t_sent_unix=T0 + i * 0.01, error="boom"))
            continue
        offsets, t = [], rng.uniform(0.01, 0.05)
        for _ in range(tokens):
            offsets.append(t)
            t += rng.uniform(0.002, 0.008)
        out.append(RequestTiming(ok=True, t_sent_unix=T0 + i * 0.01, token_offsets_s=tuple(offsets), prompt_tokens=200,
                                 output_tokens=tokens, tokens_estimated=i == 3))
    return out


def run_endless(requests: list[RequestTiming], record: EndlessRecord) -> None:
    """As `LoadRunner` does: each request as it ends, then the horizon of the earliest still in flight."""
    for index, timing in enumerate(requests):
        record.add(index, timing)
        record.settle(timing.t_sent_unix - 1.0)


def test_after_100k_requests_exactly_k_are_kept_and_the_figures_are_the_exact_ones_over_all():
    requests = synthetic(100_000)
    record = EndlessRecord(500, random.Random(1), exact_values=10**6)
    run_endless(requests, record)
    assert len(record.sample) == 500 and record.total == 100_000
    assert len(record.figures.peak) <= 2 * 101  # the sweep keeps only the last second's (the horizon's slack), not 100k
    duration = 1000.0
    assert record.figures.figures(duration) == bench_figures(requests, duration)
    assert record.note() == {"kept": 500, "of": 100_000, "method": "uniform random sample (reservoir)",
                             "figures": "over all requests; percentiles exact"}


def test_past_the_exact_values_percentiles_stay_within_the_stated_accuracy():
    requests = synthetic(100_000, tokens=4)  # 300,000 gaps: past EXACT_VALUES, folded into buckets
    record = EndlessRecord(200, random.Random(2))
    run_endless(requests, record)
    got, want = record.figures.figures(500.0), bench_figures(requests, 500.0)
    assert not record.figures.exact and "within 0.5 %" in record.note()["figures"]
    for key in ("completed", "failed", "total_input_tokens", "total_output_tokens", "tokens_estimated",
                "request_throughput", "output_throughput", "total_token_throughput", "peak_concurrent_requests"):
        assert got[key] == want[key], key
    for figure in ("ttft_s", "tpot_s", "itl_s", "e2el_s"):
        assert got[figure]["n"] == want[figure]["n"]
        assert got[figure]["mean"] == pytest.approx(want[figure]["mean"], rel=1e-12)
        for q in ("p50", "p90", "p99"):
            assert got[figure][q] == pytest.approx(want[figure][q], rel=RELATIVE_ACCURACY), (figure, q)


def test_the_sample_is_drawn_from_the_whole_run_in_send_order():
    reservoir: Reservoir[int] = Reservoir(100, random.Random(3))
    for i in range(100_000):
        reservoir.offer(i, i)
    items = reservoir.items()
    assert len(items) == 100 and items == sorted(items)
    assert items[0] < 10_000 and items[-1] > 90_000  # not the first K, not the last K


def test_a_distribution_is_exact_up_to_its_cap_then_bounded():
    values = [random.Random(4).random() for _ in range(1000)]
    exact = Distribution(exact_values=1000)
    exact.extend(values)
    assert exact.exact and exact.summary() == summarize(values)
    exact.add(0.5)
    assert not exact.exact and exact.n == 1001
    assert len(Distribution()._buckets) == 0 and EXACT_VALUES >= 10_000


def test_a_long_session_keeps_its_latest_requests_and_its_summary_over_all():
    session = Session(1, datetime(2026, 1, 1, tzinfo=UTC), "http://x")
    requests = synthetic(KEEP_SESSION_REQUESTS * 5, tokens=8)
    for timing in requests:
        session.add_request(timing)
    assert session.requests == requests[-KEEP_SESSION_REQUESTS:] and session.request_count == len(requests)
    run = session_run(session, datetime(2026, 1, 1, 1, tzinfo=UTC))
    assert run["result"]["summary"] == summarize_requests(requests)
    assert len(run["requests"]) == KEEP_SESSION_REQUESTS
    assert run["requests_sample"]["kept"] == KEEP_SESSION_REQUESTS and run["requests_sample"]["of"] == len(requests)
    assert f"a sample of {KEEP_SESSION_REQUESTS} of {len(requests)}" in run_header(run)["summary"]


def test_a_run_says_when_its_requests_are_a_sample_and_says_nothing_otherwise():
    started = datetime(2026, 1, 1, tzinfo=UTC)
    whole = new_run("bench", {}, {}, [], {}, started, started)
    assert "requests_sample" not in whole
    sampled = new_run("bench", {}, {}, [], {}, started, started, requests_sample={"kept": 2, "of": 9})
    assert sampled["requests_sample"] == {"kept": 2, "of": 9}


def test_the_busy_line_names_the_meters_cpu():
    assert busy_line(97.4) == "client busy: 97 % CPU, figures marked"
