"""The token timeline: one lane per request, the prefill span then decode as density, aligned at each send or on
one wall clock (`v` switches); the layout arithmetic is `tui.core.view.timeline.layout`, each lane's cells
`tui.core.view.lane_cells`. The lanes are drawn cell by cell, not through plotext: a cell must say how many tokens
fell in it, or why none did, and a scatter plot's dots cannot."""

from __future__ import annotations

import time

from rich.segment import Segment
from rich.style import Style
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from tui.app.widgets.text import set_text
from tui.core.measure.gaps import CLIENT, SERVER, UNKNOWN, count_by_cause, counts_line
from tui.core.measure.records import RequestTiming
from tui.core.view.lane_cells import (
    BURST,
    DECODE,
    EMPTY,
    FAILED,
    GAP_KINDS,
    PREFILL,
    SENT,
    THROUGH,
    TRANSFER,
    Cell,
    axis_ticks,
)
from tui.core.view.lane_figures import NEWEST, figures_line, selected_index
from tui.core.view.timeline import ALIGNED, WALL_CLOCK, Lane, TimelineLayout, batches, layout, with_selected

REPLOT_INTERVAL_S = 0.25
"""The chart redraws at most four times a second; the figures under it update with every batch."""
TRAILING_S = 0.1
"""A replot that is not yet due waits for the next new lanes (so it lands in the frame they paint anyway),
or this long past its due time when none come: the last lanes of a stream are always drawn."""
AXIS_ROWS = 2
"""Chart rows that are not lanes: the axis and its labels."""

PREFILL_MARK = "━"
TRANSFER_MARK = "═"
"""A disaggregated request's KV cache moving from the prefill worker to the decode worker."""
DECODE_MARKS = "▁▂▃▄▅▆▇█"
"""Decode cells by level: how many tokens fell in the cell, the view's typical count at half height (▄)."""
THROUGH_MARK = "·"
"""No token in the cell, but the lane was decoding through it (the gap around it is a typical one)."""
SENT_MARK = "▶"
"""A lane sent and waiting for its first token."""
FAILED_MARK = "✗"
"""A lane that failed before its first token: it is over, not waiting."""
BURST_MARK = "▪"
"""Decode arrivals flagged as clumped by delivery: they time the delivery, not the generation."""
GAP_MARKS = {GAP_KINDS[SERVER]: "╍", GAP_KINDS[CLIENT]: "░", GAP_KINDS[UNKNOWN]: "?"}
"""A gap long enough to name, by whose it is: the server's (its step held the lane), the client's (the meter read
late), or of unknown cause."""
GAP_NAMES = {GAP_KINDS[SERVER]: "server stall", GAP_KINDS[CLIENT]: "client stall", GAP_KINDS[UNKNOWN]: "gap, cause unknown"}
MARKS = {PREFILL: PREFILL_MARK, TRANSFER: TRANSFER_MARK, THROUGH: THROUGH_MARK, SENT: SENT_MARK, FAILED: FAILED_MARK,
         BURST: BURST_MARK, EMPTY: " ", **GAP_MARKS}
STYLED = {PREFILL: "prefill", TRANSFER: "transfer", THROUGH: "through", SENT: "prefill", FAILED: "prefill",
          BURST: "burst", DECODE: "decode", **{kind: kind for kind in GAP_KINDS.values()}}
"""Each cell kind's component class (after "timeline-plot--")."""


def mark(cell: Cell) -> str:
    return DECODE_MARKS[cell.level - 1] if cell.kind == DECODE else MARKS[cell.kind]


class TimelinePlot(Widget):
    """The lanes, one row each: the label and TTFT, then the cells; the axis under them."""

    COMPONENT_CLASSES = {f"timeline-plot--{name}" for name in (*set(STYLED.values()), "axis", "label")}
    """The marks' colours, set in the .tcss from the theme."""

    lanes: reactive[list[Lane]] = reactive(list, always_update=True, repaint=False)  # replot() refreshes
    """Lanes to draw, oldest first."""
    batch_of: list[int] = []
    """One batch number per lane (set with `lanes`): wall clock zooms to the last batch."""
    view: reactive[str] = reactive(ALIGNED, repaint=False)
    """ALIGNED or WALL_CLOCK."""

    class Drawn(Message):
        """A replot drew this layout (None: no lanes); the pane names the view, the marks and the lanes left out."""

        def __init__(self, layout: TimelineLayout | None) -> None:
            super().__init__()
            self.layout = layout

    replot_interval_s = REPLOT_INTERVAL_S
    """Least time between two replots on new lanes: the chart's frame budget (0: every change at once)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._replotted_at = -float("inf")
        self._replot_timer = None
        self._strips: list[Strip] = []
        self.drawn: TimelineLayout | None = None
        """What the last replot drew (lanes, axis, spans, cells): tests measure the chart from this (not `layout`:
        that is the widget's CSS layout)."""

    def on_mount(self) -> None:
        self.watch(self.app, "theme", lambda: self.call_after_refresh(self.replot))

    def on_resize(self) -> None:
        self.replot()

    def watch_lanes(self) -> None:
        wait_s = self._replotted_at + self.replot_interval_s - time.monotonic()
        if wait_s <= 0:
            self.replot()
        elif self._replot_timer is None:  # the latest lanes are drawn when the budget allows
            self._replot_timer = self.set_timer(wait_s + TRAILING_S, self._replot_due)

    def watch_view(self) -> None:
        self.replot()

    def _replot_due(self) -> None:
        self._replot_timer = None
        self.replot()

    def replot(self) -> None:
        self._replotted_at = time.monotonic()
        if self._replot_timer is not None:
            self._replot_timer.stop()
            self._replot_timer = None
        width, height = self.size
        if not self.lanes or width <= 0:
            self.drawn = None
            self._strips = self._empty(width, height)
        else:
            # One row per lane: more lanes than rows would draw two requests on one row.
            self.drawn = layout(self.lanes, self.view, height - AXIS_ROWS, width,
                                self.batch_of if len(self.batch_of) == len(self.lanes) else None)
            self._strips = self._draw(self.drawn, width, height)
        self.refresh()
        self.post_message(self.Drawn(self.drawn))

    def render_line(self, y: int) -> Strip:
        return self._strips[y] if y < len(self._strips) else Strip.blank(self.size.width, self.rich_style)

    def _style(self, name: str) -> Style:
        """A component class's style over the widget's own (its background, its opacity when the pane is down)."""
        return self.rich_style + self.get_component_rich_style(f"timeline-plot--{name}")

    def _empty(self, width: int, height: int) -> list[Strip]:
        hint = "send a prompt (s) to see prefill, then decode"[:width]
        strips = [Strip.blank(width, self.rich_style) for _ in range(height)]
        if height:
            strips[height // 2] = Strip([Segment(hint.center(width), self._style("label"))])
        return strips

    def _draw(self, drawn: TimelineLayout, width: int, height: int) -> list[Strip]:
        label_style, styles = self._style("label"), {name: self._style(name) for name in set(STYLED.values())}
        base = self.rich_style
        label_width = width - drawn.cells - 1
        lane_rows = height - AXIS_ROWS
        strips = [Strip.blank(width, self.rich_style) for _ in range(max(0, lane_rows - len(drawn.rows)))]  # lanes at the bottom
        for row in drawn.rows:
            segments = [Segment(row.tick_label[:label_width].rjust(label_width) + " ", label_style)]
            run, kind = [], None
            for cell in row.cells:
                if cell.kind != kind and run:
                    segments.append(Segment("".join(run), styles.get(STYLED.get(kind, ""), base)))
                    run = []
                kind = cell.kind
                run.append(mark(cell))
            if run:
                segments.append(Segment("".join(run), styles.get(STYLED.get(kind, ""), base)))
            strips.append(Strip(segments, width))
        strips.extend(self._axis(drawn, label_width, width))
        return strips[-height:] if height else []

    def _axis(self, drawn: TimelineLayout, label_width: int, width: int) -> list[Strip]:
        """The axis line with a tick per label, and the labels, under the cells; the unit after the last."""
        ticks = axis_ticks(drawn.x_min, drawn.x_max, drawn.cells)
        line, labels = ["─"] * drawn.cells, [" "] * drawn.cells
        for col, text in ticks:
            line[col] = "┬"
            if col + len(text) <= drawn.cells and all(c == " " for c in labels[max(0, col - 1):col + len(text)]):
                labels[col:col + len(text)] = text
        unit = "s after each send" if drawn.view == ALIGNED else "seconds"
        style, pad = self._style("axis"), " " * (label_width + 1)
        return [Strip([Segment(pad + "".join(line), style)], width),
                Strip([Segment(unit[:label_width].rjust(label_width) + " " + "".join(labels), style)], width)]


class TimelinePane(Vertical):
    """Timeline plus the selected lane's figures: TTFT, prefill rate, decode rate and its share of the
    ceiling, ITL p50/p99, tokens (`tui.core.view.lane_figures`); the screen's arrows move the selection."""

    can_focus = True
    """Tab reaches the pane and scrolls it into view: on an 80×24 terminal over SSH there is no mouse."""

    # repaint=False: the plot and the figures repaint themselves when they change.
    timings: reactive[list[RequestTiming]] = reactive(list, always_update=True, repaint=False)
    """The last requests (finished and in flight), oldest first."""
    lanes: reactive[list[Lane]] = reactive(list, always_update=True, repaint=False)
    """The newest timings as the timeline keeps them, their gaps judged (the live session's `Published.lanes`):
    the last `len(lanes)` timings, each labelled by its preset or prompt size."""
    batch_of: reactive[list[int]] = reactive(list, always_update=True, repaint=False)
    """One batch number per timing, where the live session gave them (else each send's, from the send times)."""
    decode_ceiling_tok_s: reactive[float | None] = reactive(None, repaint=False)
    ceiling_factor: reactive[float | None] = reactive(None, repaint=False)
    """A speculating server's tokens a step, named beside the ceiling it multiplies."""
    """Single-stream decode ceiling for this model and device, when known."""

    diagnosis: reactive[str] = reactive("", repaint=False)
    """What to change, from the domain text's rules, one finding per line."""
    client_busy: reactive[str] = reactive("", repaint=False)
    """"client busy: N % CPU, figures marked" while phasetop itself is near a core; "" otherwise."""
    view: reactive[str] = reactive(ALIGNED, repaint=False)
    """ALIGNED (each lane from its own send) or WALL_CLOCK (one axis): the live session's."""
    selected_back: reactive[int] = reactive(NEWEST, repaint=False)
    """The lane the figures speak of, counted back from the newest (0), marked in the chart."""

    @property
    def drawn(self) -> TimelineLayout | None:
        """What the chart drew last: lanes shown, axis, prefill spans (None before any lane)."""
        return self.query_one(TimelinePlot).drawn

    def draw_now(self) -> None:
        """Draw what the pane holds now, whatever the frame budget (a key was pressed: the answer is at once)."""
        self.query_one(TimelinePlot).replot()

    def watch_view(self, view: str) -> None:
        self.query_one(TimelinePlot).view = view
        self._title()

    def _title(self, drawn: TimelineLayout | None = None) -> None:
        other = WALL_CLOCK if self.view == ALIGNED else ALIGNED
        self.border_title = f"Token timeline · {self.view} (v: {other})"
        kinds = {cell.kind for row in drawn.rows for cell in row.cells} if drawn is not None else set()
        legend = f"{PREFILL_MARK} prefill  " + (f"{TRANSFER_MARK} KV transfer  " if TRANSFER in kinds else "")
        legend += f"{DECODE_MARKS[1]}{DECODE_MARKS[3]}{DECODE_MARKS[7]} decode (tokens per cell)"
        if BURST in kinds:
            legend += f"  {BURST_MARK} delivery burst"
        legend += "".join(f"  {GAP_MARKS[kind]} {GAP_NAMES[kind]}" for kind in GAP_MARKS if kind in kinds)
        if drawn is not None and drawn.hidden:
            legend += f" · +{drawn.hidden} older (↑)"
        if drawn is not None and drawn.newer:
            legend += f" · +{drawn.newer} newer (↓)"
        self.border_subtitle = legend

    def on_timeline_plot_drawn(self, event: TimelinePlot.Drawn) -> None:
        self._title(event.layout)

    @property
    def replot_interval_s(self) -> float:
        """The chart's frame budget: least time between two replots."""
        return self.query_one(TimelinePlot).replot_interval_s

    @replot_interval_s.setter
    def replot_interval_s(self, value: float) -> None:
        self.query_one(TimelinePlot).replot_interval_s = value

    def compose(self) -> ComposeResult:
        yield TimelinePlot(id="timeline-plot")
        yield Static(id="timeline-gaps", markup=False)
        yield Static(id="timeline-figures", markup=False)
        yield Static(id="client-busy", markup=False)
        yield Static(id="diagnosis", markup=False)

    def on_mount(self) -> None:
        self.query_one("#client-busy", Static).display = False
        self.query_one("#timeline-gaps", Static).display = False
        self._title()

    def watch_client_busy(self, line: str) -> None:
        busy = self.query_one("#client-busy", Static)
        busy.display = bool(line)
        set_text(busy, line)
        self.set_class(bool(line), "-client-busy")

    def watch_diagnosis(self, diagnosis: str) -> None:
        set_text(self.query_one("#diagnosis", Static), diagnosis)

    def watch_timings(self) -> None:
        self._show_timings()

    def watch_decode_ceiling_tok_s(self) -> None:
        self._show_timings()

    def watch_selected_back(self) -> None:
        self._show_timings()

    def _show_timings(self) -> None:
        batch_of = self.batch_of if len(self.batch_of) == len(self.timings) else batches(self.timings)
        keep = min(len(self.lanes), len(self.timings))
        kept = self.timings[len(self.timings) - keep:]
        shown = self.lanes[len(self.lanes) - keep:]
        plot = self.query_one(TimelinePlot)
        plot.batch_of = batch_of[len(batch_of) - keep:]
        selected = selected_index(keep, self.selected_back)
        plot.lanes = with_selected(shown, selected)
        # Over every kept lane, drawn or not: counted over the rows that fit, the line (a row of the pane) would
        # hide the lane whose gap showed it, and the chart would redraw without end.
        counted = counts_line(count_by_cause([lane.gaps for lane in shown]))
        gaps_line = self.query_one("#timeline-gaps", Static)
        gaps_line.display = bool(counted)
        set_text(gaps_line, counted)
        gaps = shown[selected].gaps if selected is not None else ()
        set_text(self.query_one("#timeline-figures", Static),
                 figures_line(kept, self.decode_ceiling_tok_s, self.selected_back, [lane.label for lane in shown], gaps,
                              self.ceiling_factor))
