"""The token timeline: one lane per request, the prefill span then the decode ticks, on one axis."""

from __future__ import annotations

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
from tui.core.timeline import Lane, lanes, refit

KEEP_LANES = 6
AXIS_ROWS = 4
"""Plot rows that are not lanes: the frame's top and bottom, the tick labels and "seconds"."""


PREFILL_MARK = "━"
DECODE_MARK = "•"


class TimelinePlot(PlotextPlot):
    """The lanes drawn with plotext: a thick bar for prefill, a dot per content chunk."""

    COMPONENT_CLASSES = {"timeline-plot--prefill", "timeline-plot--decode"}
    """The marks' colours, set in the .tcss from the theme. They reach plotext as RGB: a named plotext
    colour is an ANSI one, which the pane's opacity cannot dim when the server is down."""

    lanes: reactive[list[Lane]] = reactive(list, always_update=True, repaint=False)  # replot() refreshes
    """Lanes to draw, oldest first."""

    def watch_lanes(self) -> None:
        self.replot()

    def on_mount(self) -> None:
        self.watch(self.app, "theme", lambda: self.call_after_refresh(self.replot))

    def on_resize(self) -> None:
        self.replot()

    def _rgb(self, component: str) -> tuple[int, int, int]:
        color = self.get_component_rich_style(component).color
        return tuple(color.get_truecolor()) if color else (255, 255, 255)

    def replot(self) -> None:
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
        for index, lane in enumerate(shown):
            # One character per cell, like the lane's tick: plotext's 2×2 "hd" marks snap to half rows,
            # which put a prefill bar a row below its label on a short plot.
            y = count - index
            prefill_end = lane.first_token_s
            if prefill_end is not None:
                plt.plot([lane.sent_s, prefill_end], [y, y], marker=PREFILL_MARK, color=prefill)
            if lane.token_s:
                plt.scatter(list(lane.token_s), [y] * len(lane.token_s), marker=DECODE_MARK, color=decode)
            elif prefill_end is None:
                plt.scatter([lane.sent_s], [y], marker="▶", color=prefill)
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

    def compose(self) -> ComposeResult:
        yield TimelinePlot(id="timeline-plot")
        yield Static(id="timeline-figures", markup=False)
        yield Static(id="diagnosis", markup=False)

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
