"""Every request the server served, not only phasetop's: a lane each from its OpenTelemetry span (outside the engine,
queue, prefill, decode), phasetop's own sends matched to theirs, each phase's percentiles over the window beside the
server's /metrics histograms, and the slowest named with the phase that made them slow.

The window is the main screen's (`tui.core.telemetry.served.TraceWindow`, fed by the trace receiver); this screen reads it
once a second and on a key. `s` saves it as a run of kind "traffic", compared like any other; the same window twice
is saved once. Every figure names its window: the spans' (first arrival to last answer) and /metrics' own."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from tui.app.layout import SHORT_HEIGHT
from tui.app.widgets.text import set_text
from tui.app.widgets.traffic_lanes import LEGEND, TrafficLanes
from tui.core.measure.records import RequestTiming
from tui.core.telemetry.served import ServedRequest, TraceWindow, match_sent, not_counted, refused_line, senders
from tui.core.telemetry.readings import HistogramQuantiles
from tui.core.view.timeline import ALIGNED, WALL_CLOCK
from tui.core.view.traffic import (own_beside_server, own_line, phase_table, served_text, slowest_lines, traffic_run,
                                   windows_line)
from tui.core.untrusted import one_line

REFRESH_S = 1.0
SLOWEST = 5
COLUMNS = ("phase", "spans p50", "p90", "p99", "n", "/metrics p50", "p90", "p99")
UI_SOURCE = "ui traffic view"


class TrafficScreen(Screen[None]):
    """The served requests of `window`, beside `own()` (phasetop's timings) and `histograms()` (the last /metrics
    read's, over `metrics_window_s()` seconds when given); `save(run)` keeps the window as a run (None: the UI saves
    nothing, --no-save)."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", tooltip="Back to the live view", id="traffic.back"),
        Binding("v", "toggle_view", "View", tooltip="Lanes on one wall clock, or each from its own arrival",
                id="traffic.view"),
        Binding("s", "save", "Save run", tooltip="Save the window as a run, to compare like any other",
                id="traffic.save"),
    ]

    def __init__(self, window: TraceWindow, receiving: str | None, own: Callable[[], Sequence[RequestTiming]],
                 histograms: Callable[[], Mapping[str, HistogramQuantiles]],
                 save: Callable[[dict], None] | None,
                 metrics_window_s: Callable[[], float | None] = lambda: None) -> None:
        super().__init__()
        self.window = window
        self.receiving = receiving
        """Where the receiver listens ("http://127.0.0.1:4318/v1/traces"), or why there is none."""
        self.own = own
        self.histograms = histograms
        self.metrics_window_s = metrics_window_s
        """The seconds the last /metrics read's histograms span (None: not known, said as the scraper's window)."""
        self.save = save
        self.saved: tuple[list[ServedRequest], str] | None = None
        """The window last saved and its run id: the same window is not saved twice."""

    def compose(self) -> ComposeResult:
        yield Static("", id="traffic-title", markup=False)
        yield Static("", id="traffic-counts", markup=False)
        yield TrafficLanes(id="traffic-lanes")
        yield Static(LEGEND, id="traffic-legend", markup=False)
        yield Static("", id="traffic-own", markup=False)
        yield Static("", id="traffic-windows", markup=False)
        table: DataTable = DataTable(id="traffic-phases", cursor_type="none", zebra_stripes=True)
        table.add_columns(*[Text(c, justify="right") if i else c for i, c in enumerate(COLUMNS)])
        yield table
        yield Static("", id="traffic-slowest", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.show()
        self.set_interval(REFRESH_S, self.show)

    def on_resize(self) -> None:
        self.set_class(self.size.height < SHORT_HEIGHT, "-short")

    def action_toggle_view(self) -> None:
        lanes = self.query_one(TrafficLanes)
        lanes.view = ALIGNED if lanes.view == WALL_CLOCK else WALL_CLOCK
        self.show()

    def _records(self) -> list[ServedRequest]:
        """The window's requests, phasetop's own sends among them marked (matched by their completion id)."""
        return match_sent(self.window.records, {t.completion_id for t in self.own() if t.completion_id})

    def action_save(self) -> None:
        records = self._records()
        if not records:
            self.notify("nothing to save: no request served yet", severity="warning", markup=False)
        elif self.save is None:
            self.notify("runs are not saved (--no-save)", severity="warning", markup=False)
        elif self.saved is not None and self.saved[0] == records:
            self.notify(f"already saved as run {self.saved[1]}: no request came in or left since", markup=False)
        else:
            run = traffic_run(records, UI_SOURCE, self.receiving)
            self.save(run)
            self.saved = (records, run["id"])  # the main screen says "saved run …" once it is written

    def show(self) -> None:
        """The window as it is now: lanes, counts, phasetop's own, the phases' table, the slowest."""
        records = self._records()
        histograms = self.histograms()
        lanes = self.query_one(TrafficLanes)
        lanes.records = records
        set_text(self.query_one("#traffic-title", Static),
                 f"Traffic: {served_text(records)}{_senders(records)} · {lanes.view} (v) · {self._where()}")
        set_text(self.query_one("#traffic-counts", Static), self._counts())
        set_text(self.query_one("#traffic-own", Static), own_line(records, own_beside_server(records, self.own())))
        set_text(self.query_one("#traffic-windows", Static), windows_line(records, histograms, self.metrics_window_s()))
        table = self.query_one(DataTable)
        table.clear()
        for row in phase_table(records, histograms):
            table.add_row(row[0], *[Text(cell, justify="right") for cell in row[1:]])
        slowest = slowest_lines(records, SLOWEST)
        heading = f"slowest to the first token, of the {len(records):,} above:"
        set_text(self.query_one("#traffic-slowest", Static),
                 "\n".join([heading, *(f"  {line}" for line in slowest)]) if slowest else "")

    def _where(self) -> str:
        if self.receiving is None:
            return "no receiver: start phasetop with --otlp [HOST:]PORT and point the server's exporter at it"
        return f"receiving at {one_line(self.receiving, 80)}"

    def _counts(self) -> str:
        """What the window does not hold, said: spans unreadable or cut, exports refused, requests pushed out, then
        on a line of its own the request spans refused for their implausible times, by reason."""
        lines = []
        if lost := not_counted(self.window.tally):
            lines.append("not counted: " + "; ".join(lost))
        if refused := refused_line(self.window.tally):
            lines.append(refused)
        return "\n".join(lines)


def _senders(records: Sequence[ServedRequest], shown: int = 3) -> str:
    """Who sent the spans (service@host, as their resource says): many servers may export to one phasetop."""
    who = senders(records)
    if not who:
        return ""
    more = f" +{len(who) - shown}" if len(who) > shown else ""
    return f" · by {one_line(', '.join(who[:shown]), 120)}{more}"
