"""Counter rates with resets, Prometheus histogram quantiles, bucket-edge flags, restarts."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from tui.core.telemetry.promstats import (
    build_snapshot,
    cached_prompt_tokens,
    counter_increase,
    histogram_delta,
    histogram_quantile,
    hit_rate,
    quantile_edge,
    rate,
    restart_reasons,
    time_since_restart,
    window_quantiles,
)
from tui.core.telemetry.readings import Histogram, Restart, ServerReading

INF = math.inf
LATENCY_LE = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, INF)


def cumulative(bounds, observations) -> tuple[tuple[float, float], ...]:
    return tuple((le, float(sum(1 for v in observations if v <= le))) for le in bounds)


def hist(bounds, observations) -> Histogram:
    return Histogram(cumulative(bounds, observations), float(len(observations)), float(sum(observations)))


@pytest.mark.parametrize(
    ("previous", "current", "increase"),
    [(10, 15, 5), (10, 10, 0), (100, 7, 7), (0, 0, 0)],
)
def test_counter_increase_reads_a_fall_as_a_restart_from_zero(previous, current, increase):
    assert counter_increase(previous, current) == increase


def test_rate_is_never_negative_across_a_reset():
    assert rate(1000.0, 30.0, 2.0) == 15.0
    assert rate(10.0, 30.0, 2.0) == 10.0
    assert rate(None, 30.0, 2.0) is None
    assert rate(10.0, 30.0, 0.0) is None


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        # 10 observations: 4 in (0.5, 0.8], 4 in (0.8, 1.0], 2 in (1.5, 2.0]
        (0.5, 0.8 + 0.2 * (1 / 4)),  # rank 5: first of the (0.8, 1.0] bucket's 4
        (0.4, 0.8),  # rank 4: the top of (0.5, 0.8]
        (0.9, 1.5 + 0.5 * (1 / 2)),  # rank 9 in (1.5, 2.0], which holds 2
        (0.99, 1.5 + 0.5 * (1.9 / 2)),
    ],
)
def test_histogram_quantile_interpolates_as_prometheus(q, expected):
    buckets = cumulative(LATENCY_LE, [0.6] * 4 + [0.9] * 4 + [1.8] * 2)
    assert histogram_quantile(q, buckets) == pytest.approx(expected)


def test_histogram_quantile_first_bucket_interpolates_from_zero_and_inf_returns_last_bound():
    low = cumulative(LATENCY_LE, [0.1] * 10)
    assert histogram_quantile(0.5, low) == pytest.approx(0.15)
    assert quantile_edge(0.5, low) == "first"
    high = cumulative(LATENCY_LE, [0.6] + [5.0] * 9)
    assert histogram_quantile(0.5, high) == 2.0
    assert quantile_edge(0.5, high) == "last"
    assert quantile_edge(0.05, high) is None


def test_histogram_quantile_with_a_zero_first_bound_returns_it():
    buckets = cumulative((0.0, 0.1, 1.0, INF), [0.0] * 8 + [0.5] * 2)
    assert histogram_quantile(0.5, buckets) == 0.0


def test_histogram_quantile_is_none_without_observations_or_inf_bucket():
    assert histogram_quantile(0.5, cumulative(LATENCY_LE, [])) is None
    assert histogram_quantile(0.5, ((0.3, 4.0), (0.5, 5.0))) is None


def test_histogram_quantile_reads_le_in_any_order():
    buckets = cumulative(LATENCY_LE, [0.6] * 4 + [0.9] * 4 + [1.8] * 2)
    assert histogram_quantile(0.5, tuple(reversed(buckets))) == histogram_quantile(0.5, buckets)


def test_window_quantiles_use_only_the_observations_between_readings():
    before = hist(LATENCY_LE, [5.0] * 100)  # old slow requests must not weigh on the window
    after = hist(LATENCY_LE, [5.0] * 100 + [0.6] * 4 + [0.9] * 6)
    q = window_quantiles(before, after)
    assert q.n == 10 and q.n_total == 110
    assert q.p50 == pytest.approx(0.8 + 0.2 * (1 / 6))
    assert q.mean == pytest.approx((0.6 * 4 + 0.9 * 6) / 10)
    assert q.edges == {}
    assert (q.first_le, q.last_le) == (0.3, 2.0)


def test_window_quantiles_flag_bounds_in_the_first_bucket():
    before = hist(LATENCY_LE, [1.0])
    after = hist(LATENCY_LE, [1.0] + [0.05] * 9 + [1.2])
    q = window_quantiles(before, after)
    assert q.edges == {"p50": "first", "p90": "first"}
    assert q.p50 <= 0.3 and q.p90 <= 0.3


def test_histogram_delta_after_a_reset_is_the_new_histogram():
    before = hist(LATENCY_LE, [0.6] * 50)
    after = hist(LATENCY_LE, [0.9] * 3)
    assert histogram_delta(before, after) == after


def test_hit_rate():
    assert hit_rate(25, 100) == 0.25
    assert hit_rate(0, 0) is None
    assert hit_rate(None, 10) is None


def reading(t, counters=None, config=None, start=None, histograms=None, gauges=None) -> ServerReading:
    return ServerReading(
        t_mono=t,
        t_unix=1e9 + t,
        engine="vllm",
        gauges=gauges or {},
        counters=counters or {},
        engine_config=config or {},
        process_start_s=start,
        histograms=histograms or {},
    )


def test_restart_reasons():
    old = reading(0, {"prompt_tokens_total": 500.0}, {"block_size": "16", "max_model_len": "4096"}, 100.0)
    assert restart_reasons(old, reading(1, {"prompt_tokens_total": 600.0}, {"block_size": "16"}, 100.0)) == ()
    fell = restart_reasons(old, reading(1, {"prompt_tokens_total": 5.0}, {"block_size": "16"}, 100.0))
    assert fell == ("counters reset (prompt_tokens_total)",)
    new_start = restart_reasons(old, reading(1, {"prompt_tokens_total": 900.0}, {"block_size": "16"}, 200.0))
    assert new_start == ("process_start_time_seconds changed",)
    new_config = restart_reasons(old, reading(1, {"prompt_tokens_total": 900.0}, {"block_size": "32"}, 100.0))
    assert new_config == ("cache_config_info changed",)


def test_build_snapshot_rates_and_windowed_hit_rate():
    before = reading(10.0, {"prompt_tokens_total": 1000.0, "generation_tokens_total": 50.0,
                            "prefix_cache_queries_total": 400.0, "prefix_cache_hits_total": 100.0})
    after = reading(12.0, {"prompt_tokens_total": 3000.0, "generation_tokens_total": 250.0,
                           "prefix_cache_queries_total": 600.0, "prefix_cache_hits_total": 250.0})
    snap = build_snapshot(before, after)
    assert snap.window_s == 2.0
    assert snap.prompt_tok_s == 1000.0
    assert snap.generation_tok_s == 100.0
    assert snap.prefix_cache_hit_rate == 0.75
    assert snap.prefix_cache_hit_rate_total == pytest.approx(250 / 600)
    first = build_snapshot(None, after)
    assert first.window_s is None and first.prompt_tok_s is None and first.prefix_cache_hit_rate is None


RESTARTED = Restart(("process_start_time_seconds changed",), {}, {})
OLD_COUNTERS = {"prompt_tokens_total": 8000.0, "generation_tokens_total": 1500.0,
                "prefix_cache_queries_total": 2000.0, "prefix_cache_hits_total": 500.0}
NEW_COUNTERS = {"prompt_tokens_total": 9000.0, "generation_tokens_total": 1600.0,
                "prefix_cache_queries_total": 2400.0, "prefix_cache_hits_total": 600.0}


def test_after_a_restart_past_the_old_totals_nothing_of_the_old_process_is_a_baseline():
    """The new process started 1 s before the scrape, 4 s into a 5 s window, and outgrew every old total."""
    old_ttft = hist(LATENCY_LE, [0.6] * 20)
    new_ttft = hist(LATENCY_LE, [0.6] * 20 + [1.8] * 30)  # every bucket at or above the old one
    before = reading(10.0, OLD_COUNTERS, start=1e9, histograms={"ttft_s": old_ttft})
    after = reading(15.0, NEW_COUNTERS, start=1e9 + 14.0, histograms={"ttft_s": new_ttft})
    snap = build_snapshot(before, after, RESTARTED)
    assert snap.window_s == 1.0
    assert snap.prompt_tok_s == 9000.0 and snap.generation_tok_s == 1600.0  # not (9000 − 8000) / 5
    assert snap.prefix_cache_hit_rate == 0.25
    ttft = snap.histograms["ttft_s"]
    assert ttft.n == ttft.n_total == 50
    assert ttft.p50 == pytest.approx(1.5 + 0.5 * (5 / 30))  # rank 25: 20 at 0.6, then 30 in (1.5, 2.0]
    # The same readings without the restart are the buggy reading this guards against.
    unflagged = build_snapshot(before, after)
    assert unflagged.prompt_tok_s == 200.0 and unflagged.histograms["ttft_s"].n == 30


@pytest.mark.parametrize(
    ("start", "since"),
    [
        (1e9 + 14.0, 1.0),  # inside the window
        (1e9 + 9.5, 5.0),  # half a second before the previous scrape: whole-second boot time, clamped
        (1e9 + 8.0, None),  # well before: not this restart's start (a skewed clock)
        (1e9 + 20.0, None),  # after the scrape: a skewed clock
        (1e9, None),  # the old start: this restart was seen another way
        (None, None),  # no process_start_time at all (llama.cpp)
    ],
)
def test_time_since_restart_only_when_the_start_lies_in_the_window(start, since):
    before = reading(10.0, OLD_COUNTERS, start=1e9)
    after = reading(15.0, NEW_COUNTERS, start=start)
    assert time_since_restart(before, after) == since


def test_a_restart_without_a_placeable_start_has_no_window_and_no_rates():
    before = reading(10.0, OLD_COUNTERS, start=1e9, histograms={"ttft_s": hist(LATENCY_LE, [0.6] * 20)})
    after = reading(15.0, NEW_COUNTERS, start=1e9, histograms={"ttft_s": hist(LATENCY_LE, [0.6] * 20 + [1.8] * 30)})
    snap = build_snapshot(before, after, Restart(("cache_config_info changed",), {}, {}))
    assert snap.window_s is None
    assert snap.prompt_tok_s is None and snap.generation_tok_s is None and snap.preemptions_per_s is None
    assert snap.prompt_tokens_total == 9000.0
    assert snap.prefix_cache_hit_rate == 0.25  # a ratio needs no time base
    assert snap.histograms["ttft_s"].n == 50


# ---- vLLM 0.32's prompt-token counters, KV size, estimated reads --------------------------------------


def test_cached_over_all_prompt_tokens_beats_hits_over_queries():
    """Both paths present: the hit rate is cached / all prompt tokens, and says so in source_names."""
    before = reading(10.0, {"prompt_tokens_total": 1000.0, "prompt_tokens_cached_total": 100.0,
                            "prefix_cache_queries_total": 1000.0, "prefix_cache_hits_total": 100.0})
    after = reading(12.0, {"prompt_tokens_total": 3000.0, "prompt_tokens_cached_total": 1100.0,
                           "prefix_cache_queries_total": 1500.0, "prefix_cache_hits_total": 400.0})
    snap = build_snapshot(before, after)
    assert snap.prefix_cache_hit_rate == pytest.approx(1000 / 2000)  # hits/queries would say 300/500
    assert snap.prefix_cache_hit_rate_total == pytest.approx(1100 / 3000)
    assert snap.prompt_tokens_cached_total == 1100.0
    assert snap.source_names["prefix_cache_hit_rate"] == "vllm:prompt_tokens_cached_total / vllm:prompt_tokens_total"


def test_by_source_split_alone_gives_the_hit_rate():
    def split(compute, hit, external):
        return {"prompt_tokens_local_compute_total": compute, "prompt_tokens_local_cache_hit_total": hit,
                "prompt_tokens_external_kv_transfer_total": external}
    snap = build_snapshot(reading(0.0, split(100.0, 0.0, 0.0)), reading(1.0, split(400.0, 500.0, 100.0)))
    assert snap.prefix_cache_hit_rate == pytest.approx(500 / 900), "KV pulled from a prefill worker is no cache hit"
    assert snap.prompt_tokens_cached_total == 500.0
    assert snap.prompt_tokens_by_source == {"local_compute": 400.0, "local_cache_hit": 500.0, "external_kv_transfer": 100.0}


def test_old_hits_over_queries_path_stays_and_is_named():
    before = reading(0.0, {"prefix_cache_queries_total": 100.0, "prefix_cache_hits_total": 10.0})
    after = reading(1.0, {"prefix_cache_queries_total": 300.0, "prefix_cache_hits_total": 60.0})
    after = replace(after, source_names={"prefix_cache_hits_total": "vllm:prefix_cache_hits_total",
                                         "prefix_cache_queries_total": "vllm:prefix_cache_queries_total"})
    snap = build_snapshot(before, after)
    assert snap.prefix_cache_hit_rate == pytest.approx(50 / 200)
    assert snap.prompt_tokens_cached_total is None
    assert snap.source_names["prefix_cache_hit_rate"] == "vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total"


def test_kv_tokens_used_is_usage_times_size():
    snap = build_snapshot(None, reading(0.0, gauges={"kv_cache_usage": 0.25, "kv_cache_size_tokens": 32768.0}))
    assert snap.kv_cache_size_tokens == 32768.0 and snap.kv_cache_used_tokens == 8192.0
    assert build_snapshot(None, reading(0.0, gauges={"kv_cache_usage": 0.25})).kv_cache_used_tokens is None


@pytest.mark.parametrize(("before", "after", "gbs"), [
    (1.0e11, 4.0e11, 150.0),  # 3e11 bytes in 2 s
    (0.0, 0.0, None),  # --enable-mfu-metrics off: the counter exists and stays 0
    (None, None, None),  # older vLLM: no counter
    (4.0e11, 4.0e11, 0.0),  # on, but nothing ran in the window: a real 0
])
def test_estimated_read_gbs_over_the_window(before, after, gbs):
    counters = (lambda v: {} if v is None else {"est_read_bytes_total": v})
    snap = build_snapshot(reading(10.0, counters(before)), reading(12.0, counters(after)))
    assert snap.est_read_gbs == (pytest.approx(gbs) if gbs is not None else None)


@pytest.mark.parametrize(("before", "after", "cached"), [
    ({"prompt_tokens_cached_total": 100.0, "prefix_cache_hits_total": 90.0},
     {"prompt_tokens_cached_total": 321.0, "prefix_cache_hits_total": 300.0}, 221),  # prefers the cached counter
    ({"prefix_cache_hits_total": 90.0}, {"prefix_cache_hits_total": 300.0}, 210),  # older vLLM, llama.cpp
    ({"prompt_tokens_local_compute_total": 10.0, "prompt_tokens_local_cache_hit_total": 0.0},
     {"prompt_tokens_local_compute_total": 15.0, "prompt_tokens_local_cache_hit_total": 64.0}, 64),  # the split only
    ({"prompt_tokens_local_compute_total": 0.0, "prompt_tokens_external_kv_transfer_total": 0.0, "prompt_tokens_cached_total": 0.0},
     {"prompt_tokens_local_compute_total": 1.0, "prompt_tokens_external_kv_transfer_total": 3999.0,
      "prompt_tokens_cached_total": 3999.0}, 0),  # a decode worker's pulled KV: no cache hit
    ({"generation_tokens_total": 1.0}, {"generation_tokens_total": 9.0}, None),  # no cache counter: unknown
    ({"prompt_tokens_cached_total": 500.0, "prompt_tokens_total": 900.0},
     {"prompt_tokens_cached_total": 20.0, "prompt_tokens_total": 40.0}, None),  # restarted between: unknown, not 20
])
def test_cached_prompt_tokens_between_two_readings(before, after, cached):
    assert cached_prompt_tokens(reading(0.0, before), reading(1.0, after)) == cached
