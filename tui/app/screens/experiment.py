"""One experiment, run live: progress while it runs, then its chart, its table and its finding in one line.

The experiment runs in a worker (`tui.app.feeds.experiment`); Escape stops it and goes back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult, RenderResult
from textual.binding import Binding
from textual.content import Content
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import DataTable, Footer, ProgressBar, Static
from textual.worker import Worker, get_current_worker

from tui.app.feeds.experiment import measure_plan
from tui.app.lab_messages import ExperimentFinished, ExperimentProgressed, RunSaved
from tui.app.layout import SHORT_HEIGHT
from tui.app.widgets.themed_plot import ThemedPlot
from tui.app.worker_failures import report_failed_worker
from tui.config import Settings
from tui.core.experiments.columns import COLUMNS, Column, notes_line, table
from tui.core.experiments.disaggregation import DEFAULT_KV_LINK, find_link
from tui.core.experiments.plans import OWN_SIMULATORS, Plan
from tui.core.measure.delivery import Guard
from tui.sources import loop
from tui.sources.detect import ServerInfo
from tui.sources.http import ServerClient
from tui.sources.meter import Meter


@dataclass(frozen=True, slots=True)
class Chart:
    """What an experiment draws: row keys on the left axis and on the right, or bars of one row."""

    left: tuple[str, ...] = ()
    right: tuple[str, ...] = ()
    bars: tuple[str, ...] = ()
    """Keys of the last row drawn as bars (interference: ITL before, during, after)."""
    even_x: bool = False
    """Values that double (1, 2, 4 … 32 streams) drawn evenly spaced, as a log axis would."""
    by_setup: str | None = None
    """A key drawn as one bar per row, named by its setup's short key (disaggregation: each setup's worst gap; the
    table names them in full)."""


TITLES = {
    "prompt-tokens": "Prompt length: TTFT climbs, decode stays",
    "prefix": "Prefix cache: the same long prefix sent twice, against a unique prompt",
    "concurrency": "Concurrency: aggregate tok/s and p99 ITL against streams at once",
    "interference": "Interference: a long prompt lands among running streams",
    "context": "Context growth: ITL against token position",
    "disaggregation": "Disaggregation: is it worth it? The interference workload on four setups",
    "speculation": "Speculative decoding: a stream's decode rate off and on, at batch 1, 8, 32 and 128",
}
CHARTS = {
    "prompt-tokens": Chart(left=("ttft_s",), right=("decode_tok_s",)),
    "prefix": Chart(left=("unique_ttft_s", "first_ttft_s", "second_ttft_s")),
    "concurrency": Chart(left=("aggregate_tok_s",), right=("itl_p99_s",), even_x=True),
    "interference": Chart(bars=("itl_before_s", "itl_during_s", "itl_after_s")),
    "disaggregation": Chart(by_setup="itl_worst_s"),
    "speculation": Chart(by_setup="decode_tok_s"),
    "context": Chart(left=("itl_p50_s",)),
}
RGB = tuple[int, int, int]
COLOURS: tuple[RGB, ...] = ((17, 168, 205), (230, 140, 20), (188, 63, 188))
"""Cyan, orange, magenta, as RGB so the legend line draws each line's colour exactly as plotext does."""


def legend(vary: str) -> Content:
    """The chart's lines named in their colours, with the axis each is read on.

    Plotext draws its own legend inside the plot, over whatever data runs through its corner; this
    line sits outside the plot (under the chart), so it never covers a point.
    """
    chart, columns = CHARTS[vary], {c.key: c for c in COLUMNS[vary]}
    if chart.bars or chart.by_setup:
        return Content("")
    both = bool(chart.left and chart.right)
    parts = []
    for side, keys, colours in (("left", chart.left, COLOURS), ("right", chart.right, COLOURS[::-1])):
        for colour, key in zip(colours, keys, strict=False):
            axis = f" ({side} axis)" if both else ""
            swatch = ("━━", "rgb({},{},{})".format(*colour))
            parts.append(Content.assemble(swatch, " ", f"{_label(columns[key])}{axis}"))  # a label stays plain text
    return Content("   ").join(parts)


MIN_CHART_ROWS = 5
"""Fewer rows than this (a short terminal gave them to the table and finding) and the chart is left blank."""


Y_HEADROOM = 1.05
"""The y axis reaches at least this far over the highest value, so a line's peak is not drawn on the frame."""


class ExperimentChart(ThemedPlot):
    """The rows drawn against the value swept (the table's first column), each y axis with round ticks evenly spaced."""

    rows: reactive[list[dict]] = reactive(list, always_update=True)

    def __init__(self, vary: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.vary = vary

    def watch_rows(self) -> None:
        self.replot()

    def render(self) -> RenderResult:
        if self.size.height < MIN_CHART_ROWS:  # the rows a short terminal left it hold no readable chart
            return Text("the chart needs a taller terminal; the table below has its values", style="dim")
        return super().render()

    def draw(self) -> None:
        chart = CHARTS[self.vary]
        if chart.by_setup and self.rows:
            self._plot_setups(chart.by_setup)
        elif chart.bars and self.rows:
            self._plot_bars(chart.bars)
        elif self.rows:
            self._plot_lines(chart)

    def _plot_bars(self, keys: tuple[str, ...]) -> None:
        row, columns = self.rows[-1], {c.key: c for c in COLUMNS[self.vary]}
        shown = [columns[k] for k in keys if row.get(k) is not None]
        heights = [row[c.key] * c.scale for c in shown]
        self.plt.bar([_label(c) for c in shown], heights, color=COLOURS[0])
        self._y_axis(heights, "left", self.canvas_rows(framed=True, x_labels=True))

    def _plot_setups(self, key: str) -> None:
        column = next(c for c in COLUMNS[self.vary] if c.key == key)
        shown = [row for row in self.rows if row.get(key) is not None]
        heights = [row[key] * column.scale for row in shown]
        labels = [str(row["setup_key"]) for row in shown]
        if len(set(labels)) < len(labels):  # a setup at several values (speculation's batches): each named by both
            value = COLUMNS[self.vary][1].key
            labels = [f"{label} {row[value]}" for label, row in zip(labels, shown, strict=True)]
        self.plt.bar(labels, heights, color=COLOURS[0])
        self.plt.title(_label(column))
        self._y_axis(heights, "left", self.canvas_rows(framed=True, x_labels=True, captions=1))

    def _plot_lines(self, chart: Chart) -> None:
        x_column = COLUMNS[self.vary][0]
        x = [row[x_column.key] for row in self.rows]
        self.plt.xlabel(_label(x_column))
        if chart.even_x:  # plotext's log scale fails on some signals; positions with the values as ticks
            self.plt.xticks(list(range(len(x))), [f"{v:,}" for v in x])
            x = list(range(len(x)))
        rows = self.canvas_rows(framed=True, x_labels=True, captions=1)
        self._plot_side(x, "left", chart.left, COLOURS, rows)
        self._plot_side(x, "right", chart.right, COLOURS[::-1], rows)

    def _plot_side(self, x: list[float], side: str, keys: tuple[str, ...], colours: tuple[RGB, ...], rows: int) -> None:
        """One line per key against the y axis on `side`, which starts at zero."""
        columns = {c.key: c for c in COLUMNS[self.vary]}
        drawn: list[float] = []
        for colour, key in zip(colours, keys, strict=False):
            column = columns[key]
            points = [(v, row[key] * column.scale) for v, row in zip(x, self.rows, strict=True) if row.get(key) is not None]
            if points:
                self.plt.plot([p[0] for p in points], [p[1] for p in points], yside=side, color=colour,
                              marker="braille")  # named in the legend line under the chart
                drawn += [p[1] for p in points]
        self._y_axis(drawn, side, rows)

    def _y_axis(self, values: list[float], side: str, rows: int) -> None:
        """The axis from zero ("decode stays" must look flat, not a cliff over a 3 % range), where a value is above it."""
        top = max(values, default=0.0)
        if top > 0:
            self.draw_y_axis(top * Y_HEADROOM, rows, side)


def _label(column: Column) -> str:
    return f"{column.label} ({column.unit})" if column.unit else column.label


def _header(column: Column) -> Text:
    """A table header of two lines, the label over its unit."""
    return Text(f"{column.label}\n{column.unit}", justify="right")


class IntervalNotes(Static):
    """Under the table: why a marked value has no interval ("no interval: ¹ fewer than 5 draws"); hidden with none."""

    DEFAULT_CSS = """
    IntervalNotes {
        height: auto;
        padding: 0 1;
    }
    """


class ExperimentScreen(Screen[None]):
    """Runs `plan` against the server on mount and shows it; saves it as a sweep run when it ends."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back", tooltip="Stop the experiment if it runs, and go back",
                        id="experiment.back")]

    rows: reactive[list[dict]] = reactive(list, always_update=True)
    """Rows finished so far, one per value swept."""
    finding: reactive[str] = reactive("")
    """The one-line finding, once the experiment ended."""

    def __init__(self, plan: Plan, settings: Settings, server_url: str, info: ServerInfo | None, save_runs: bool,
                 meter_for: Callable[[ServerClient], Meter], guard: Guard = Guard(),
                 on_run: Callable[[dict], None] | None = None, live: bool = True) -> None:
        super().__init__()
        self.live = live
        """False: nothing runs; tests post the facts themselves."""
        self.meter_for = meter_for
        """What times the experiment's requests (the main screen's meter processes)."""
        self.on_run = on_run
        """Given the experiment's run once it ends with rows (the tuning loop compares it after a restart)."""
        self.guard = guard
        """The server watch's guard: its decode ceiling (no stream decodes faster, so a request that seems to is
        flagged)."""
        self.plan = plan
        self.settings = settings
        self.server_url = server_url
        self.info = info
        self.save_runs = save_runs
        self._ended = ""
        """What the message line says once the experiment ended ("done", "stopped: …")."""

    def compose(self) -> ComposeResult:
        where = f"{self.info.model} at {self.server_url}" if self.plan.vary not in OWN_SIMULATORS else (
            f"phasetop's simulator ({self.settings.sim.gpu}, {self.settings.sim.model})"
            + (f", KV over {find_link(DEFAULT_KV_LINK).name}" if self.plan.vary == "disaggregation" else ""))
        yield Static(f"{TITLES[self.plan.vary]} · {where}", id="experiment-title", markup=False)
        if self.plan.scaled:
            yield Static(f"scaled {'; '.join(self.plan.scaled)}", id="experiment-scaled", markup=False)
        yield ProgressBar(total=1.0, show_eta=False, id="experiment-progress")
        yield Static("starting…", id="experiment-message", markup=False)
        yield ExperimentChart(self.plan.vary, id="experiment-chart").data_bind(rows=ExperimentScreen.rows)
        yield Static(legend(self.plan.vary), id="experiment-legend")
        # Units under the labels: one-line headers ("aggregate (tok/s)") push the last column off 80 columns.
        grid: DataTable = DataTable(id="experiment-table", cursor_type="none", zebra_stripes=True, header_height=2)
        grid.add_columns(*[_header(c) for c in COLUMNS[self.plan.vary]])
        yield grid
        yield IntervalNotes("", id="experiment-intervals", markup=False)
        yield Static("", id="experiment-finding", markup=False)
        yield Footer()

    def on_resize(self) -> None:
        self.set_class(self.size.height < SHORT_HEIGHT, "-short")

    def on_mount(self) -> None:
        if self.live:
            self.run_plan()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_failed_worker(self, event)

    @work(exclusive=True, group="experiment", thread=True, exit_on_error=False)
    def run_plan(self) -> None:
        cancelled: threading.Event = get_current_worker().cancelled_event
        loop.run(measure_plan(self.plan, self.settings, self.server_url, self.info, self.meter_for, self.guard,
                              self.save_runs, cancelled.is_set, self.post_message), cancelled)

    @on(ExperimentProgressed)
    def _progressed(self, event: ExperimentProgressed) -> None:
        progress = event.progress
        self.query_one(ProgressBar).update(progress=progress.fraction)
        self.query_one("#experiment-message", Static).update(progress.message)
        if progress.row is not None:
            self.rows = [*self.rows, progress.row]

    @on(ExperimentFinished)
    def _finished(self, event: ExperimentFinished) -> None:
        self.query_one(ProgressBar).update(progress=1.0)
        if event.result is not None:
            self.rows = list(event.result.rows)
            self.finding = event.result.finding
        self._ended = f"stopped: {event.error}" if event.error else "done"
        self.query_one("#experiment-message", Static).update(self._ended)
        if event.run is not None and self.on_run is not None:
            self.on_run(event.run)

    @on(RunSaved)
    def _saved(self, event: RunSaved) -> None:
        """Said on the screen's own message line: a toast would sit over the finding at 80×24."""
        message = self.query_one("#experiment-message", Static)
        outcome = f"run not saved: {event.error}" if event.error else f"saved run {event.run_id}"
        message.update(f"{self._ended} · {outcome}")
        message.set_class(bool(event.error), "-warning")

    def watch_rows(self, rows: list[dict]) -> None:
        shown = table(self.plan.vary, rows)
        cells = self.query_one(DataTable)
        cells.clear()
        for line in shown.cells:
            cells.add_row(*[Text(cell, justify="right") for cell in line])
        notes = self.query_one(IntervalNotes)
        notes.update(notes_line(shown.notes))
        notes.display = bool(shown.notes)

    def watch_finding(self, finding: str) -> None:
        self.query_one("#experiment-finding", Static).update(finding)
