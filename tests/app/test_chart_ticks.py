"""Every chart's y axis, as drawn at 80×24, 120×40 and 160×45: round labels, evenly spaced in value and in rows.

The prompt-length sweep's chart at 80×24 read 75.2, 62.7, 50.2, 25.1, 12.5, 0.0 (plotext's seven ticks on six rows,
37.6 drawn over); these read the labels off the rendered text of the real widgets.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from textual.app import App, ComposeResult

import tui.app
from tests.app.harness import ScreenHost, settings, wait_for
from tests.app.test_metrics_charts import T0, h100, ramp
from tui.app.lab_messages import ExperimentFinished
from tui.app.screens.experiment import MIN_CHART_ROWS, ExperimentChart, ExperimentScreen
from tui.app.widgets.gpu_pane import GpuPane
from tui.app.widgets.history_plot import HistoryPlot
from tui.app.widgets.metrics_pane import MetricsPane
from tui.core.experiments.plans import make_plan
from tui.core.telemetry.readings import GpuSample
from tui.sources.detect import ServerInfo
from tui.sources.meter import LocalMeter
from tui.sources.workloads.experiments import ExperimentResult

TCSS = Path(tui.app.__file__).parent / "phasetop.tcss"
SIZES = [(80, 24), (120, 40), (160, 45)]
LEFT, RIGHT = re.compile(r"^\s*(?P<label>\d[\d,.]*)┤"), re.compile(r"├(?P<label>\d[\d,.]*)\s*$")
HISTORY_LABEL = re.compile(r"^\s*(?P<label>\d[\d.]*[kMG]?)$")
UNITS = {"k": 1e3, "M": 1e6, "G": 1e9}


def value_of(label: str) -> float:
    label = label.replace(",", "")
    return float(label[:-1]) * UNITS[label[-1]] if label[-1] in UNITS else float(label)


def labels(text: str, pattern: re.Pattern, prefix: int | None = None) -> list[tuple[int, float]]:
    """(line, value) of each y label the chart drew, top line first."""
    found = []
    for line_no, line in enumerate(text.splitlines()):
        match = pattern.search(line if prefix is None else line[:prefix])
        if match:
            found.append((line_no, value_of(match["label"])))
    return found


def assert_evenly_spaced(ticks: list[tuple[int, float]], where: str) -> None:
    assert len(ticks) >= 2, f"{where}: {ticks}"
    lines, values = [t[0] for t in ticks], [t[1] for t in ticks]
    assert len(set(lines)) == len(lines)
    line_gaps = {b - a for a, b in zip(lines, lines[1:])}
    value_gaps = [a - b for a, b in zip(values, values[1:])]
    assert len(line_gaps) == 1, f"{where}: labels on lines {lines}"
    assert all(math.isclose(g, value_gaps[0], rel_tol=1e-9) for g in value_gaps), f"{where}: {values}"
    assert values[-1] == 0 and value_gaps[0] > 0, f"{where}: from zero, up: {values}"
    step = value_gaps[0]
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert any(math.isclose(mantissa, m) for m in (1, 2, 2.5, 5)), f"{where}: a round step, not {step}"


ROWS = {
    # The sweep: TTFT up to 68.4 ms (plotext's axis 0–75.2), decode near 207 tok/s.
    "prompt-tokens": [{"prompt_tokens": n, "ttft_s": ttft, "decode_tok_s": 207.0 - n / 1000, "prefill_tok_s": n / ttft,
                       "itl_p50_s": 0.0049} for n, ttft in ((200, 0.0066), (500, 0.0176), (1000, 0.0344), (2000, 0.0684))],
    "concurrency": [{"streams": s, "aggregate_tok_s": 207.0 * s * (1 - s / 200), "per_stream_tok_s": 207.0 * (1 - s / 200),
                     "itl_p50_s": 0.0049 + s * 1e-5, "itl_p99_s": 0.0101 + s * 3e-5, "ttft_p50_s": 0.007 * s}
                    for s in (1, 2, 4, 8, 16, 32)],
    "interference": [{"prompt_tokens": 4000, "streams": 8, "itl_before_s": 0.0051, "itl_during_s": 0.1372,
                      "itl_after_s": 0.0053, "prefill_ttft_s": 0.14}],
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("vary", list(ROWS))
async def test_an_experiments_chart_has_round_evenly_spaced_y_ticks(vary, size):
    plan = make_plan(vary)
    info = ServerInfo("openai", "http://gpu-box:8000", "meta-llama/Llama-3.1-8B-Instruct", 131072, "0.32.0")
    screen = ExperimentScreen(plan, settings(), info.url, info, save_runs=False, meter_for=LocalMeter, live=False)
    app = ScreenHost(screen, str(TCSS))
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.screen is screen and bool(screen.query(ExperimentChart)), what="the screen")
        screen.post_message(ExperimentFinished(ExperimentResult(plan, tuple(ROWS[vary]), "finding", ()), None))
        chart = screen.query_one(ExperimentChart)
        await wait_for(pilot, lambda: chart.rows, what="the rows drawn")
        await pilot.pause()
        assert chart.size.height >= MIN_CHART_ROWS, "a chart, not the note that it has no room"
        text = str(chart.render())
        assert_evenly_spaced(labels(text, LEFT), f"{vary} left axis at {size}")
        if vary != "interference":
            assert_evenly_spaced(labels(text, RIGHT), f"{vary} right axis at {size}")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_prompt_length_chart_holds_its_highest_ttft_within_a_step(size):
    plan = make_plan("prompt-tokens")
    info = ServerInfo("openai", "http://gpu-box:8000", "m", 131072, "0.32.0")
    screen = ExperimentScreen(plan, settings(), info.url, info, save_runs=False, meter_for=LocalMeter, live=False)
    app = ScreenHost(screen, str(TCSS))
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.screen is screen, what="the screen")
        screen.post_message(ExperimentFinished(ExperimentResult(plan, tuple(ROWS["prompt-tokens"]), "finding", ()), None))
        chart = screen.query_one(ExperimentChart)
        await wait_for(pilot, lambda: chart.rows, what="the rows drawn")
        await pilot.pause()
        (_, top), (_, below) = labels(str(chart.render()), LEFT)[:2]
        assert 68.4 * 1.05 < top + (top - below), "the axis holds the highest TTFT: it ends within a step over its top tick"
        assert top >= 68.4 / 2.5, "the data fill the axis, not a corner of it"


class _Panes(App):
    CSS_PATH = TCSS

    def compose(self) -> ComposeResult:
        yield MetricsPane(id="metrics-pane", classes="pane")
        yield GpuPane(id="gpu-pane", classes="pane")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_every_history_chart_has_round_evenly_spaced_y_ticks(size):
    app = _Panes()
    async with app.run_test(size=size) as pilot:
        metrics, gpu = app.query_one(MetricsPane), app.query_one(GpuPane)
        for snapshot in ramp():
            metrics.snapshot = snapshot
            await pilot.pause()
        for i, gbs in enumerate([800.0, 1600.0, 2400.0]):
            gpu.gpu = GpuSample(t_unix=T0 + i, devices=(h100(gbs),))
            await pilot.pause()
        charts = [c for c in app.query(HistoryPlot) if c.display and c.size.height > 0 and c.drawn_now_unix]
        if size != (80, 24):
            assert charts, "a pane with room charts its history"
        for chart in charts:
            assert_evenly_spaced(labels(str(chart.render()), HISTORY_LABEL, prefix=4), f"{chart.id} at {size}")
