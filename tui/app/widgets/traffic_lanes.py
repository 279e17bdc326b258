"""Every request the server served, a lane each from its span: the time outside the engine, the queue, prefill to
the first token, then decode (`tui.core.view.traffic.traffic_layout`), on one wall clock or each from its arrival; the
axis in seconds under them. Drawn cell by cell as the token timeline is, in its colours."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from tui.core.view.lane_cells import axis_ticks
from tui.core.telemetry.served import ServedRequest
from tui.core.view.timeline import WALL_CLOCK
from tui.core.view.traffic import (DECODE, EMPTY, OUTSIDE, PREFILL, QUEUE, TrafficLayout, hidden_line, short_id,
                                   traffic_layout)

MARKS = {OUTSIDE: "┄", QUEUE: "░", PREFILL: "━", DECODE: "▄", EMPTY: " "}
OWN_MARK = "◆"
LEGEND = (f"{MARKS[OUTSIDE]} outside the engine  {MARKS[QUEUE]} queue  {MARKS[PREFILL]} prefill  {MARKS[DECODE]} decode"
          f"  ·  {OWN_MARK} sent by phasetop  ·  label: the server's request id, its TTFT")
LABEL_WIDTH = 30
AXIS_ROWS = 2


class TrafficLanes(Widget):
    """The newest requests that fit, oldest at the top, under a note of how many older ones did not; `drawn` is
    what the last draw laid out."""

    COMPONENT_CLASSES = {f"traffic-lanes--{name}" for name in (OUTSIDE, QUEUE, PREFILL, DECODE, "axis", "label")}

    records: reactive[list[ServedRequest]] = reactive(list, always_update=True, repaint=False)
    view: reactive[str] = reactive(WALL_CLOCK, repaint=False)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.drawn: TrafficLayout | None = None
        self._strips: list[Strip] = []

    def on_resize(self) -> None:
        self.redraw()

    def watch_records(self) -> None:
        self.redraw()

    def watch_view(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        width, height = self.size
        cells = max(0, width - LABEL_WIDTH - 1)
        rows = max(0, height - AXIS_ROWS)
        if len(self.records) > rows:
            rows = max(0, rows - 1)  # the top row says how many older ones did not fit
        self.drawn = traffic_layout(self.records, cells, rows, self.view)
        self._strips = self._draw(self.drawn, width, height)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        return self._strips[y] if y < len(self._strips) else Strip.blank(self.size.width, self.rich_style)

    def _style(self, name: str) -> Style:
        return self.rich_style + self.get_component_rich_style(f"traffic-lanes--{name}")

    def _draw(self, drawn: TrafficLayout, width: int, height: int) -> list[Strip]:
        if not drawn.lanes:
            hint = (hidden_line(drawn.hidden) if drawn.hidden
                    else "no request served yet: each one the server's spans tell of shows here")[:width]
            strips = [Strip.blank(width, self.rich_style) for _ in range(height)]
            if height:
                strips[height // 2] = Strip([Segment(hint.center(width), self._style("label"))])
            return strips
        label = self._style("label")
        styles = {phase: self._style(phase) for phase in (OUTSIDE, QUEUE, PREFILL, DECODE)}
        note = [Strip([Segment(hidden_line(drawn.hidden)[:width].ljust(width), label)], width)] if drawn.hidden else []
        blank = max(0, height - AXIS_ROWS - len(drawn.lanes) - len(note))
        strips = note + [Strip.blank(width, self.rich_style) for _ in range(blank)]
        for lane in drawn.lanes:
            record = lane.record
            ttft = f" {record.ttft_s * 1e3:,.0f} ms"
            name = short_id(record, LABEL_WIDTH - 2 - len(ttft))
            mark = OWN_MARK if record.sent_by_phasetop else " "
            segments = [Segment(f"{mark} {name}{ttft}"[-LABEL_WIDTH:].rjust(LABEL_WIDTH) + " ", label)]
            run: list[str] = []
            phase = None
            for cell in lane.cells:
                if cell != phase and run:
                    segments.append(Segment("".join(run), styles.get(phase, self.rich_style)))
                    run = []
                phase = cell
                run.append(MARKS[cell])
            if run:
                segments.append(Segment("".join(run), styles.get(phase, self.rich_style)))
            strips.append(Strip(segments, width))
        strips.extend(self._axis(drawn, width))
        return strips[-height:] if height else []

    def _axis(self, drawn: TrafficLayout, width: int) -> list[Strip]:
        cells = width - LABEL_WIDTH - 1
        line, labels = ["─"] * cells, [" "] * cells
        for col, text in axis_ticks(0.0, drawn.span_s, cells):
            line[col] = "┬"
            if col + len(text) <= cells and all(c == " " for c in labels[max(0, col - 1):col + len(text)]):
                labels[col:col + len(text)] = text
        unit = "s after arrival" if drawn.t0_unix is None else "s, wall clock"
        axis = self._style("axis")
        return [Strip([Segment(" " * (LABEL_WIDTH + 1) + "".join(line), axis)], width),
                Strip([Segment(unit[:LABEL_WIDTH].rjust(LABEL_WIDTH) + " " + "".join(labels), axis)], width)]
