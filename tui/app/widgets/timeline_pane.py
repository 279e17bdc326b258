"""The token timeline: one lane per request, the prefill span then the decode ticks, aligned at each send or
on one wall clock (`v` switches); the layout arithmetic is `tui.core.timeline.layout`."""

from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.message import Message
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Static

from tui.app.widgets.text import set_text
from tui.app.widgets.themed_plot import ThemedPlot
from tui.core.lane_figures import NEWEST, figures_line, selected_index
from tui.core.records import RequestTiming
from tui.core.timeline import (ALIGNED, KEEP_LANES, VIEWS, WALL_CLOCK, Lane, TimelineLayout, batches, default_view, keep_count,
                               lanes, layout, thin)

REPLOT_INTERVAL_S = 0.25
"""The chart redraws at most four times a second (plotext builds the whole figure each time); the figures
under it update with every batch."""
TRAILING_S = 0.1
"""A replot that is not yet due waits for the next new lanes (so it lands in the frame they paint anyway),
or this long past its due time when none come: the last lanes of a stream are always drawn."""
AXIS_ROWS = 4
"""Plot rows that are not lanes: the frame's top and bottom, the tick labels and "seconds"."""


PREFILL_MARK = "━"
TRANSFER_MARK = "═"
"""A disaggregated request's KV cache moving from the prefill worker to the decode worker."""
DECODE_MARK = "•"
SENT_MARK = "▶"
"""A lane sent and waiting for its first token."""
FAILED_MARK = "✗"
"""A lane that failed before its first token: it is over, not waiting."""
BURST_MARK = "▪"
"""Decode arrivals flagged as clumped by delivery: they time the delivery, not the generation."""


class TimelinePlot(ThemedPlot):
    """The lanes drawn with plotext: a thick bar for prefill, a dot per content chunk."""

    COMPONENT_CLASSES = {"timeline-plot--prefill", "timeline-plot--transfer", "timeline-plot--decode"}
    """The marks' colours, set in the .tcss from the theme (`ThemedPlot._rgb`)."""

    lanes: reactive[list[Lane]] = reactive(list, always_update=True, repaint=False)  # replot() refreshes
    """Lanes to draw, oldest first."""
    batch_of: list[int] = []
    """One batch number per lane (set with `lanes`): wall clock zooms to the last batch."""
    view: reactive[str] = reactive(ALIGNED, repaint=False)
    """ALIGNED or WALL_CLOCK."""

    class Drawn(Message):
        """A replot drew this layout (None: no lanes); the pane names the view and the lanes left out."""

        def __init__(self, layout: TimelineLayout | None) -> None:
            super().__init__()
            self.layout = layout

    replot_interval_s = REPLOT_INTERVAL_S
    """Least time between two replots on new lanes: the chart's frame budget (0: every change at once)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._replotted_at = -float("inf")
        self._replot_timer = None
        self.drawn: TimelineLayout | None = None
        """What the last replot drew (lanes, axis, spans): tests measure the chart from this (not `layout`:
        that is the widget's CSS layout)."""

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
        super().replot()

    def draw(self) -> None:
        plt = self.plt
        plt.xlabel("seconds")
        if not self.lanes:
            plt.title("send a prompt (s) to see prefill, then decode")
        prefill, decode = self._rgb("timeline-plot--prefill"), self._rgb("timeline-plot--decode")
        transfer = self._rgb("timeline-plot--transfer")
        # One row per lane: more lanes than rows would draw two requests on one row.
        drawn = layout(self.lanes, self.view, self.size.height - AXIS_ROWS, self.size.width,
                       self.batch_of if len(self.batch_of) == len(self.lanes) else None)
        self.drawn = drawn if self.lanes else None
        shown = drawn.rows if self.lanes else ()
        count = len(shown)
        for index, row in enumerate(shown):
            # One character per cell, like the lane's tick: plotext's 2×2 "hd" marks snap to half rows,
            # which put a prefill bar a row below its label on a short plot.
            y = count - index
            if row.prefill is not None:
                plt.plot(list(row.prefill), [y, y], marker=PREFILL_MARK, color=prefill)
            if row.ticks:
                ticks = thin(row.ticks, drawn.x_min, drawn.x_max, drawn.cells)
                plt.scatter(ticks, [y] * len(ticks), marker=BURST_MARK if row.lane.burst else DECODE_MARK, color=decode)
            elif row.lane.first_token_s is None and drawn.x_min <= row.sent_s <= drawn.x_max:
                # sent, no token yet; or failed before its first (the toast says why)
                plt.scatter([row.sent_s], [y], marker=SENT_MARK if row.lane.ok else FAILED_MARK, color=prefill)
            if row.transfer is not None:  # over the first decode tick: a move shorter than a cell still shows
                plt.plot(list(row.transfer), [y, y], marker=TRANSFER_MARK, color=transfer)
        if count:
            plt.yticks(list(range(count, 0, -1)), [row.tick_label for row in shown])
            plt.ylim(0.5, count + 0.5)
            plt.xlim(drawn.x_min, drawn.x_max)
            plt.xlabel("seconds after each send" if self.view == ALIGNED else "seconds")
        self.post_message(self.Drawn(drawn if self.lanes else None))


class TimelinePane(Vertical):
    """Timeline plus the selected lane's figures: TTFT, prefill rate, decode rate and its share of the
    ceiling, ITL p50/p99, tokens (`tui.core.lane_figures`); the screen's arrows move the selection."""

    can_focus = True
    """Tab reaches the pane and scrolls it into view: on an 80×24 terminal over SSH there is no mouse."""

    # repaint=False: the plot and the figures repaint themselves when they change.
    timings: reactive[list[RequestTiming]] = reactive(list, always_update=True, repaint=False)
    """The last requests (finished and in flight), oldest first."""
    labels: reactive[list[str]] = reactive(list, always_update=True, repaint=False)
    """One label per timing (the preset or prompt size)."""
    decode_ceiling_tok_s: reactive[float | None] = reactive(None, repaint=False)
    """Single-stream decode ceiling for this model and device, when known."""

    diagnosis: reactive[str] = reactive("", repaint=False)
    """What to change, from the domain text's rules, one finding per line."""
    client_busy: reactive[str] = reactive("", repaint=False)
    """"client busy: N % CPU, figures marked" while phasetop itself is near a core; "" otherwise."""
    view: reactive[str] = reactive(ALIGNED, repaint=False)
    """ALIGNED (each lane from its own send) or WALL_CLOCK (one axis); each new send sets its default."""
    selected_back: reactive[int] = reactive(NEWEST, repaint=False)
    """The lane the figures speak of, counted back from the newest (0), marked in the chart."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._last_batch: tuple[float, int] | None = None
        """(first send, size) of the newest batch: a new one sets the view to its default."""

    @property
    def drawn(self) -> TimelineLayout | None:
        """What the chart drew last: lanes shown, axis, prefill spans (None before any lane)."""
        return self.query_one(TimelinePlot).drawn

    def toggle_view(self) -> None:
        self.view = VIEWS[(VIEWS.index(self.view) + 1) % len(VIEWS)]

    def watch_view(self, view: str) -> None:
        self.query_one(TimelinePlot).view = view
        self._title()

    def _title(self, drawn: TimelineLayout | None = None) -> None:
        other = WALL_CLOCK if self.view == ALIGNED else ALIGNED
        self.border_title = f"Token timeline · {self.view} (v: {other})"
        moved = drawn is not None and any(row.transfer is not None for row in drawn.rows)
        legend = f"{PREFILL_MARK} prefill  " + (f"{TRANSFER_MARK} KV transfer  " if moved else "") + f"{DECODE_MARK} decode"
        if drawn is not None and any(row.lane.burst for row in drawn.rows):
            legend += f"  {BURST_MARK} delivery burst"
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
        yield Static(id="timeline-figures", markup=False)
        yield Static(id="client-busy", markup=False)
        yield Static(id="diagnosis", markup=False)

    def on_mount(self) -> None:
        self.query_one("#client-busy", Static).display = False
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
        labels = self.labels if len(self.labels) == len(self.timings) else None
        batch_of = batches(self.timings)
        keep = keep_count(batch_of, KEEP_LANES)
        last = [t.t_sent_unix for t, b in zip(self.timings, batch_of, strict=True) if b == batch_of[-1]]
        batch = (last[0], len(last)) if last else None
        if batch != self._last_batch:  # a new send (or its batch grew): its default view, until `v`
            self._last_batch = batch
            if batch is not None:
                self.view = default_view(self.timings, batch_of)
        kept = self.timings[-keep:] if keep else []
        kept_labels = labels[-keep:] if labels and keep else None
        plot = self.query_one(TimelinePlot)
        plot.batch_of = batch_of[-keep:] if keep else []
        plot.lanes = lanes(kept, kept_labels, keep=max(keep, 1), selected=selected_index(len(kept), self.selected_back))
        set_text(self.query_one("#timeline-figures", Static),
                 figures_line(kept, self.decode_ceiling_tok_s, self.selected_back, kept_labels))
