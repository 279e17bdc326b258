"""The token timeline: one lane per request, the prefill span then the decode ticks, on one axis."""

from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Static
from textual_plotext import PlotextPlot

from tui.app.widgets.text import set_text
from tui.core.delivery import DELIVERY_NOT_GENERATION
from tui.core.reconcile import reconcile
from tui.core.records import RequestTiming
from tui.core.stats import summarize
from tui.core.timeline import Lane, lanes, refit, thin

KEEP_LANES = 6
REPLOT_INTERVAL_S = 0.25
"""The chart redraws at most four times a second (plotext builds the whole figure each time); the figures
under it update with every batch."""
TRAILING_S = 0.1
"""A replot that is not yet due waits for the next new lanes (so it lands in the frame they paint anyway),
or this long past its due time when none come: the last lanes of a stream are always drawn."""
AXIS_ROWS = 4
"""Plot rows that are not lanes: the frame's top and bottom, the tick labels and "seconds"."""


PREFILL_MARK = "━"
DECODE_MARK = "•"
SENT_MARK = "▶"
"""A lane sent and waiting for its first token."""
FAILED_MARK = "✗"
"""A lane that failed before its first token: it is over, not waiting."""


class TimelinePlot(PlotextPlot):
    """The lanes drawn with plotext: a thick bar for prefill, a dot per content chunk."""

    COMPONENT_CLASSES = {"timeline-plot--prefill", "timeline-plot--decode"}
    """The marks' colours, set in the .tcss from the theme. They reach plotext as RGB: a named plotext
    colour is an ANSI one, which the pane's opacity cannot dim when the server is down."""

    lanes: reactive[list[Lane]] = reactive(list, always_update=True, repaint=False)  # replot() refreshes
    """Lanes to draw, oldest first."""

    replot_interval_s = REPLOT_INTERVAL_S
    """Least time between two replots on new lanes: the chart's frame budget (0: every change at once)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._replotted_at = -float("inf")
        self._replot_timer = None
        self._replots = 0
        self._rendered: tuple[tuple, object] | None = None
        """(replot count, size, theme) → the figure built for them: plotext builds the whole figure on every
        render, and a layout pass elsewhere on the screen re-renders the plot without a new replot."""

    def render(self):
        key = (self._replots, self.size, self.app.theme)
        if self._rendered is None or self._rendered[0] != key:
            self._rendered = (key, super().render())
        return self._rendered[1]

    def watch_lanes(self) -> None:
        wait_s = self._replotted_at + self.replot_interval_s - time.monotonic()
        if wait_s <= 0:
            self.replot()
        elif self._replot_timer is None:  # the latest lanes are drawn when the budget allows
            self._replot_timer = self.set_timer(wait_s + TRAILING_S, self._replot_due)

    def _replot_due(self) -> None:
        self._replot_timer = None
        self.replot()

    def on_mount(self) -> None:
        self.watch(self.app, "theme", lambda: self.call_after_refresh(self.replot))

    def on_resize(self) -> None:
        self.replot()

    def _rgb(self, component: str) -> tuple[int, int, int]:
        color = self.get_component_rich_style(component).color
        return tuple(color.get_truecolor()) if color else (255, 255, 255)

    def replot(self) -> None:
        self._replotted_at = time.monotonic()
        self._replots += 1
        if self._replot_timer is not None:
            self._replot_timer.stop()
            self._replot_timer = None
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.xlabel("seconds")
        if not self.lanes:
            plt.title("send a prompt (s) to see prefill, then decode")
        prefill, decode = self._rgb("timeline-plot--prefill"), self._rgb("timeline-plot--decode")
        # One row per lane: more lanes than rows would draw two requests on one row.
        shown = refit(self.lanes, max(1, self.size.height - AXIS_ROWS))
        count = len(shown)
        end_s = max((lane.token_s[-1] for lane in shown if lane.token_s), default=0.0)
        for index, lane in enumerate(shown):
            # One character per cell, like the lane's tick: plotext's 2×2 "hd" marks snap to half rows,
            # which put a prefill bar a row below its label on a short plot.
            y = count - index
            prefill_end = lane.first_token_s
            if prefill_end is not None:
                plt.plot([lane.sent_s, prefill_end], [y, y], marker=PREFILL_MARK, color=prefill)
            if lane.token_s:
                ticks = thin(lane.token_s, 0.0, end_s, self.size.width)
                plt.scatter(ticks, [y] * len(ticks), marker=DECODE_MARK, color=decode)
            elif prefill_end is None:  # sent, no token yet; or failed before its first (the toast says why)
                plt.scatter([lane.sent_s], [y], marker=SENT_MARK if lane.ok else FAILED_MARK, color=prefill)
        if count:
            plt.yticks(list(range(count, 0, -1)), [lane.label for lane in shown])
            plt.ylim(0.5, count + 0.5)
        self.refresh()


class TimelinePane(Vertical):
    """Timeline plus its figures: TTFT, prefill rate, decode rate, ITL p50/p99, share of the ceiling."""

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

    def _show_timings(self) -> None:
        shown = self.timings[-KEEP_LANES:]
        labels = self.labels[-KEEP_LANES:] if len(self.labels) >= len(shown) else None
        self.query_one(TimelinePlot).lanes = lanes(shown, labels, keep=KEEP_LANES)
        set_text(self.query_one("#timeline-figures", Static), figures_line(self.timings, self.decode_ceiling_tok_s))


def figures_line(timings: list[RequestTiming], ceiling_tok_s: float | None) -> str:
    """The figures of the latest request with a first token, and ITL percentiles over the shown ones.

    A request marked cold (a model load, or a fresh server's first) keeps its place in the percentiles,
    as in probe's summary, but its prefill rate is labelled "cold start"."""
    latest = next((t for t in reversed(timings) if t.ttft_s is not None), None)
    if latest is None:
        return "TTFT –   prefill –   decode –   ITL p50 – p99 –"
    itl = summarize(gap for t in timings[-KEEP_LANES:] if not t.burst for gap in t.itl_s)
    # A cold request's TTFT holds the server's start-up, so its prefill rate is not the prompt's: say so.
    source = f"{latest.prefill_source}, cold start" if latest.cold else latest.prefill_source
    prefill = f"{latest.prefill_tok_s:,.0f} tok/s ({source})" if latest.prefill_tok_s else "–"
    decode = f"{latest.decode_tok_s:,.1f} tok/s" if latest.decode_tok_s else "–"
    share = ""
    if latest.decode_tok_s and ceiling_tok_s:
        share = f" = {latest.decode_tok_s / ceiling_tok_s:.0%} of the {ceiling_tok_s:,.0f} tok/s ceiling"
    p50 = f"{itl.p50 * 1e3:.1f} ms" if itl.p50 is not None else "–"
    p99 = f"{itl.p99 * 1e3:.1f} ms" if itl.p99 is not None else "–"
    line = f"TTFT {latest.ttft_s * 1e3:,.1f} ms   prefill {prefill}   decode {decode}{share}   ITL p50 {p50} p99 {p99}"
    both = reconcile(latest)
    if both is not None and both.network_s is not None:  # vLLM's own queue and TTFT: the parts of the client's
        line += (f"\nTTFT = network {both.network_s * 1e3:,.1f} + queue {both.server_queue_s * 1e3:,.1f} "
                 f"+ prefill and first step {both.server_prompt_s * 1e3:,.1f} ms (the server's clock)")
    if latest.burst:
        line += f"\n{DELIVERY_NOT_GENERATION}: {latest.burst}"
    return line
