"""The metrics and GPU/host panes chart their history where they have room, and keep one line per metric
(sparklines, text) where they do not."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from textual.app import App, ComposeResult
from textual.widgets import Sparkline, Static

import tui.app
from tests.snapshots.recorded import metrics
from tui.app.widgets.gpu_pane import GpuPane
from tui.app.widgets.history_plot import HistoryPlot
from tui.app.widgets.metrics_pane import CHART_MIN_COLUMNS, CHART_MIN_ROWS, MetricsPane
from tui.core.telemetry.readings import GpuReading, GpuSample, HistogramQuantiles

TCSS = Path(tui.app.__file__).parent / "phasetop.tcss"
T0 = 1_735_732_800.0
ROOMY, SMALL = (100, 20), (80, 12)
"""A pane with room for charts (96×18 inside its border), and the narrow layout's 12 rows."""
NO_REQUESTS = HistogramQuantiles(p50=None, p90=None, p99=None, mean=None, n=0, n_total=2, first_le=0.001, last_le=80.0)


class _MetricsHost(App):
    CSS_PATH = TCSS

    def compose(self) -> ComposeResult:
        yield MetricsPane(id="metrics-pane", classes="pane")


class _GpuHost(App):
    CSS_PATH = TCSS

    def compose(self) -> ComposeResult:
        yield GpuPane(id="gpu-pane", classes="pane")


def chart_text(app: App, selector: str) -> str:
    return str(app.query_one(selector, HistoryPlot).render())


async def feed(pilot, pane: MetricsPane, snapshots) -> None:
    for snapshot in snapshots:
        pane.snapshot = snapshot
        await pilot.pause()


def ramp(start: float = T0, count: int = 6):
    """Scrapes a second apart, TTFT, running and KV growing."""
    return [metrics(start + i, running=i, kv=0.1 * i, decode_tok_s=100.0 + i) for i in range(count)]


async def test_a_roomy_pane_charts_each_metric_under_its_value():
    app = _MetricsHost()
    async with app.run_test(size=ROOMY) as pilot:
        pane = app.query_one(MetricsPane)
        assert pane.content_size.height >= CHART_MIN_ROWS and pane.content_size.width >= CHART_MIN_COLUMNS
        await feed(pilot, pane, ramp())
        assert pane.charted
        for cell in ("ttft", "itl", "load", "kv"):
            chart = app.query_one(f"#chart-{cell}", HistoryPlot)
            assert chart.display and chart.size.height >= 3, cell
        for key in ("ttft", "itl", "running", "waiting", "kv"):
            assert not app.query_one(f"#spark-{key}", Sparkline).display
            value = app.query_one(f"#value-{key}", Static)
            assert value.display and pane.content_region.contains_region(value.region), f"{key}'s value is shown"
        assert str(app.query_one("#value-running", Static).render()) == "5"
        assert str(app.query_one("#value-kv", Static).render()) == "50%"
        load = app.query_one("#chart-load", HistoryPlot)
        running, waiting = load.lines
        assert [v for _, v in running.series.points] == [0, 1, 2, 3, 4, 5]
        assert [v for _, v in waiting.series.points] == [0.0] * 6
        kv = app.query_one("#chart-kv", HistoryPlot).lines[0]
        assert kv.scale == 100.0 and kv.series.points[-1] == (T0 + 5, 0.5)
        ttft = app.query_one("#chart-ttft", HistoryPlot)
        assert [line.series.points[-1] for line in ttft.lines] == [(T0 + 5, 0.021), (T0 + 5, 0.214)]
        assert "200" in chart_text(app, "#chart-ttft"), "round ticks, in ms, up past the highest p99 (214 ms)"
        assert "now" in chart_text(app, "#chart-kv") and "-1m" in chart_text(app, "#chart-kv")
        assert "100" in chart_text(app, "#chart-kv"), "KV usage against a 0–100 % axis"
        assert "decode 105 tok/s" in str(app.query_one("#metrics-extra", Static).render())


async def test_a_small_pane_keeps_its_sparklines_and_switches_on_resize():
    app = _MetricsHost()
    async with app.run_test(size=SMALL) as pilot:
        pane = app.query_one(MetricsPane)
        await feed(pilot, pane, ramp())
        assert not pane.charted
        spark = app.query_one("#spark-running", Sparkline)
        assert spark.display and list(spark.data)[-6:] == [0, 1, 2, 3, 4, 5]
        assert not app.query_one("#chart-load", HistoryPlot).display

        await pilot.resize_terminal(*ROOMY)
        await pilot.pause()
        assert pane.charted and not spark.display
        chart = app.query_one("#chart-load", HistoryPlot)
        assert chart.display and chart.drawn_now_unix == T0 + 5, "shown, the chart draws the history it kept"

        await pilot.resize_terminal(*SMALL)
        await pilot.pause()
        assert not pane.charted and spark.display


async def test_a_window_without_requests_is_a_gap_in_the_chart_and_the_baseline_of_the_sparkline():
    app = _MetricsHost()
    async with app.run_test(size=ROOMY) as pilot:
        pane = app.query_one(MetricsPane)
        idle = [replace(s, histograms={"ttft_s": NO_REQUESTS, "itl_s": NO_REQUESTS}) for s in ramp(T0 + 2, 2)]
        await feed(pilot, pane, ramp(T0, 2) + idle + ramp(T0 + 4, 2))
        p50 = app.query_one("#chart-ttft", HistoryPlot).lines[0].series
        assert [v for _, v in p50.points] == [0.021, 0.021, None, None, 0.021, 0.021]
        assert len(p50.runs(T0 + 5)) == 2, "two lines, nothing drawn across the idle windows"
        assert list(app.query_one("#spark-ttft", Sparkline).data)[-6:] == [0.021, 0.021, 0.0, 0.0, 0.021, 0.021]


async def test_the_charts_redraw_at_most_every_quarter_second_of_scrapes():
    app = _MetricsHost()
    async with app.run_test(size=ROOMY) as pilot:
        pane = app.query_one(MetricsPane)
        chart = app.query_one("#chart-ttft", HistoryPlot)
        await feed(pilot, pane, [metrics(T0, 1, 0.1, 100.0)])
        assert chart.drawn_now_unix == T0
        await feed(pilot, pane, [metrics(T0 + 0.1, 1, 0.1, 100.0), metrics(T0 + 0.2, 1, 0.1, 100.0)])
        assert chart.drawn_now_unix == T0, "not due: the lines are held"
        assert chart.lines[0].series.newest_t == T0 + 0.2
        await feed(pilot, pane, [metrics(T0 + 0.3, 1, 0.1, 100.0)])
        assert chart.drawn_now_unix == T0 + 0.3


def h100(gbs: float | None, source: str = "gpm") -> GpuReading:
    return GpuReading(index="0", name="NVIDIA H100", mem_bw_util=None if gbs is None else gbs / 3350, mem_bw_gbs=gbs,
                      mem_bw_source=source, peak_bw_gbs=3350.0, sm_util=0.3)


async def test_the_gpu_pane_charts_measured_gb_s_against_the_peak_where_it_has_room():
    app = _GpuHost()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(GpuPane)
        for i, gbs in enumerate([800.0, 1600.0, 2400.0]):
            pane.gpu = GpuSample(t_unix=T0 + i, devices=(h100(gbs),))
            await pilot.pause()
        assert pane.has_class("-charted")
        chart = app.query_one("#gpu-chart", HistoryPlot)
        assert chart.display and chart.references == [3350.0]
        [line] = chart.lines
        assert [v for _, v in line.series.points] == [800.0, 1600.0, 2400.0]
        text = chart_text(app, "#gpu-chart")
        assert "3350" not in text and "2000" in text, "round ticks; the peak is stated above the chart"
        flat = [line for line in text.splitlines() if sum(line.count(c) for c in "⣀⠤⠒⠉") >= chart.size.width - 8]
        assert flat, "the peak's line runs across the chart"
        assert "memory bandwidth 2,400 of 3,350 GB/s (72% of peak)" in pane.text, "the figures stay above the chart"
        assert pane.region.height == len(pane.text.splitlines()) + chart.size.height + 2, "the pane takes what it needs"


async def test_the_gpu_pane_stays_text_without_gpm_or_without_room():
    app = _GpuHost()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(GpuPane)
        pane.gpu = GpuSample(t_unix=T0, reason="NVML: driver not loaded")
        await pilot.pause()
        assert pane.text == "no GPU: NVML: driver not loaded" and not pane.has_class("-charted")
        assert pane.region.height == 3, "one line inside its border"
        pane.gpu = GpuSample(t_unix=T0 + 1, devices=(h100(None, source="utilization"),))
        await pilot.pause()
        assert not pane.has_class("-charted"), "busy time is not bandwidth: nothing to chart"
        assert not app.query_one("#gpu-chart", HistoryPlot).display

    app = _GpuHost()
    async with app.run_test(size=(100, 8)) as pilot:
        pane = app.query_one(GpuPane)
        pane.gpu = GpuSample(t_unix=T0, devices=(h100(800.0),))
        await pilot.pause()
        assert not pane.has_class("-charted"), "six rows inside the border: three lines and no room for five of chart"
        assert "memory bandwidth 800 of 3,350 GB/s" in pane.text


async def test_absurd_numbers_from_the_server_are_drawn_inside_the_axis_and_never_break_the_chart():
    app = _MetricsHost()
    async with app.run_test(size=ROOMY) as pilot:
        pane = app.query_one(MetricsPane)
        absurd = [1.7e308, -1e308, 1e-300, -5.0, 3.0]
        await feed(pilot, pane, [replace(metrics(T0 + i, v, v, 1.0), waiting=v) for i, v in enumerate(absurd)])
        load = app.query_one("#chart-load", HistoryPlot)
        assert load.drawn_now_unix == T0 + 4 and "now" in chart_text(app, "#chart-load")
        assert "100" in chart_text(app, "#chart-kv"), "KV usage of 1.7e308 × 100 % is drawn at the top"
        assert str(app.query_one("#value-running", Static).render()) == "3"

    app = _GpuHost()
    async with app.run_test(size=(100, 40)) as pilot:  # 1e308 GB/s in full takes 20 rows of the pane's text
        pane = app.query_one(GpuPane)
        huge = replace(h100(1e308), peak_bw_gbs=1.7e308)
        pane.gpu = GpuSample(t_unix=T0, devices=(huge, replace(huge, index="1", peak_bw_gbs=-1.0)))
        await pilot.pause()
        chart = app.query_one("#gpu-chart", HistoryPlot)
        assert pane.has_class("-charted") and chart.references == [1.7e308], "a negative peak is no peak"
        assert "now" in chart_text(app, "#gpu-chart")
