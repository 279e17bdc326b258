"""The charts' history: points kept over a span, gaps for what is not a number, GB/s per device."""

from __future__ import annotations

import math

import pytest

from tui.core.telemetry.metric_history import METRICS, GpuHistory, MetricHistory, Series, metric_values
from tui.core.telemetry.readings import GpuReading, GpuSample, HistogramQuantiles, MetricsSnapshot


def quantiles(p50: float | None, p99: float | None, n: float) -> HistogramQuantiles:
    return HistogramQuantiles(p50=p50, p90=None, p99=p99, mean=None, n=n, n_total=n, first_le=0.001, last_le=80.0)


def gpm(index: str, gbs: float | None, peak: float | None = 3350.0) -> GpuReading:
    return GpuReading(index=index, name="NVIDIA H100", mem_bw_gbs=gbs, mem_bw_source="gpm", peak_bw_gbs=peak)


def test_points_older_than_the_span_before_the_newest_are_dropped():
    series = Series(span_s=10.0)
    for t in range(21):
        series.add(100.0 + t, float(t))
    assert [t for t, _ in series.points] == [100.0 + t for t in range(10, 21)], "t = 110 is exactly 10 s old: kept"
    assert series.oldest_t == 110.0 and series.newest_t == 120.0


def test_a_series_keeps_at_most_max_points():
    series = Series(span_s=1e9, max_points=5)
    for t in range(12):
        series.add(float(t), 1.0)
    assert [t for t, _ in series.points] == [7.0, 8.0, 9.0, 10.0, 11.0]


@pytest.mark.parametrize("gap", [None, math.nan, math.inf, -math.inf])
def test_what_is_not_a_finite_number_is_a_gap_between_runs(gap):
    series = Series()
    for t, value in enumerate([1.0, 2.0, gap, gap, 5.0, 6.0, 7.0, gap, 9.0]):
        series.add(1000.0 + t, value)
    assert [v for _, v in series.points] == [1.0, 2.0, None, None, 5.0, 6.0, 7.0, None, 9.0]
    assert series.runs(1008.0) == [([-8.0, -7.0], [1.0, 2.0]), ([-4.0, -3.0, -2.0], [5.0, 6.0, 7.0]), ([0.0], [9.0])]
    assert series.has_numbers()


def test_runs_are_scaled_and_measured_back_from_now():
    series = Series()
    series.add(50.0, 0.021)
    series.add(51.0, 0.214)
    [(x, y)] = series.runs(52.0, scale=1e3)
    assert x == [-2.0, -1.0] and y == pytest.approx([21.0, 214.0])


def test_only_gaps_have_no_numbers_and_no_runs():
    series = Series()
    series.add(1.0, None)
    series.add(2.0, math.nan)
    assert not series.has_numbers() and series.runs(2.0) == []


def test_a_clock_stepped_back_drops_the_points_after_it():
    series = Series()
    for t in (10.0, 11.0, 12.0, 13.0):
        series.add(t, t)
    series.add(11.5, 0.0)
    assert series.points == [(10.0, 10.0), (11.0, 11.0), (11.5, 0.0)]


def test_a_point_without_a_finite_time_is_ignored():
    series = Series()
    series.add(1.0, 1.0)
    series.add(math.nan, 2.0)
    series.add(math.inf, 3.0)
    assert series.points == [(1.0, 1.0)]


def test_latest_gives_a_sparklines_last_values_oldest_first():
    series = Series()
    for t, value in enumerate([1.0, None, 3.0, 4.0]):
        series.add(float(t), value)
    assert series.latest(3) == [None, 3.0, 4.0]
    assert series.latest(10) == [1.0, None, 3.0, 4.0]


def test_a_scrape_gives_each_charted_metric():
    snapshot = MetricsSnapshot(t_unix=5.0, engine="vllm", window_s=1.0, running=3.0, waiting=math.nan, kv_cache_usage=0.42,
                               histograms={"ttft_s": quantiles(0.021, 0.214, 2), "itl_s": quantiles(None, None, 0)})
    values = metric_values(snapshot)
    assert math.isnan(values.pop("waiting")), "as sent: the series makes it a gap"
    assert values == {"ttft_p50_s": 0.021, "ttft_p99_s": 0.214, "itl_p50_s": None, "itl_p99_s": None,
                      "running": 3.0, "kv_cache_usage": 0.42}
    history = MetricHistory()
    history.add(snapshot)
    assert set(history.series) == set(METRICS) and history.newest_t == 5.0
    assert history.series["waiting"].points == [(5.0, None)], "NaN waiting: a gap"
    assert history.series["ttft_p99_s"].points == [(5.0, 0.214)]


def test_a_window_with_no_requests_has_no_quantiles_even_where_the_server_sent_some():
    snapshot = MetricsSnapshot(t_unix=5.0, engine="vllm", window_s=1.0, histograms={"ttft_s": quantiles(0.3, 0.3, 0)})
    assert metric_values(snapshot)["ttft_p50_s"] is None
    assert metric_values(MetricsSnapshot(t_unix=5.0, engine=None, window_s=None))["itl_p99_s"] is None


def test_gb_s_per_device_with_its_latest_peak():
    history = GpuHistory()
    history.add(GpuSample(t_unix=1.0, devices=(gpm("0", 800.0), gpm("1", 900.0, peak=math.nan))))
    history.add(GpuSample(t_unix=2.0, devices=(gpm("0", 1200.0, peak=3000.0), gpm("1", 950.0, peak=3350.0))))
    zero, one = history.devices
    assert (zero.index, zero.peak_gbs, zero.gbs.points) == ("0", 3000.0, [(1.0, 800.0), (2.0, 1200.0)])
    assert (one.index, one.peak_gbs, one.gbs.points) == ("1", 3350.0, [(1.0, 900.0), (2.0, 950.0)])
    assert history.newest_t == 2.0


def test_busy_time_is_not_bandwidth_and_a_missing_device_leaves_a_gap():
    busy = GpuReading(index="1", name="T4", mem_bw_util=0.6, mem_bw_source="utilization")
    history = GpuHistory()
    history.add(GpuSample(t_unix=1.0, devices=(gpm("0", 800.0), busy)))
    assert [d.index for d in history.devices] == ["0"], "a device with no GB/s has nothing to chart"
    history.add(GpuSample(t_unix=2.0, devices=()))
    history.add(GpuSample(t_unix=3.0, devices=(gpm("0", 700.0),)))
    [zero] = history.devices
    assert zero.gbs.points == [(1.0, 800.0), (2.0, None), (3.0, 700.0)]
    assert len(zero.gbs.runs(3.0)) == 2


def test_a_device_whose_gb_s_aged_out_is_dropped():
    history = GpuHistory(span_s=10.0)
    history.add(GpuSample(t_unix=0.0, devices=(gpm("0", 800.0),)))
    history.add(GpuSample(t_unix=5.0, devices=(gpm("0", None),)))
    assert [d.index for d in history.devices] == ["0"]
    history.add(GpuSample(t_unix=11.0, devices=(gpm("0", None),)))
    assert history.devices == []
    history.add(GpuSample(t_unix=math.nan, devices=(gpm("0", 1.0),)))
    assert history.devices == [] and history.newest_t == 11.0, "a sample with no finite time is ignored"
