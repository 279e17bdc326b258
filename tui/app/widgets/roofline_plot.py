"""The roofline chart: log-log, arithmetic intensity across, achieved FLOP/s up, the device's two roofs, the points.

plotext is given log10 of every figure on linear axes, with ticks labelled by the powers they stand for: its own
log scale takes limits and ticks in another space, and a roof is two straight segments in log-log either way.
"""

from __future__ import annotations

import math

from textual.color import Color

from tui.app.widgets.themed_plot import ThemedPlot
from tui.core.hardware.roofline import DECODE, PREFILL, PhasePoint, Roofs
from tui.core.hardware.roofline_live import LiveRoofline
from tui.core.hardware.roofline_traces import NARROWER_BITS

MARKERS = {PREFILL: "●", DECODE: "●", "server": "◆"}
"""Each point's mark; the line under the chart says which is which."""
GHOST_MARKER, TRACE_MARKER = "○", "▪"
"""Decode projected to fewer bits (nothing measured it), and a sweep's points, smaller than the live ones."""
LABEL_OFFSET = 0.12
"""A label's distance from its point, in decades: it starts beside the mark, not over it."""
MAX_LABEL_MOVES = 4
"""Rows a label may move down to clear the marks and labels before it; past that it is drawn where it is."""
PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


class RooflinePlot(ThemedPlot):
    """Both roofs, the ridge where they meet, and each phase's point labelled with its share of the roof above."""

    ROOF, RIDGE, PREFILL, DECODE, ESTIMATE = ("roofline-plot--roof", "roofline-plot--ridge", "roofline-plot--prefill",
                                              "roofline-plot--decode", "roofline-plot--estimate")
    COMPONENT_CLASSES = {ROOF, RIDGE, PREFILL, DECODE, ESTIMATE}
    """The colours, set in the .tcss from the theme (`ThemedPlot._rgb`)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.view: LiveRoofline | None = None
        """What is drawn (tests read it)."""

    def show(self, view: LiveRoofline) -> None:
        self.view = view
        self.replot()

    def draw(self) -> None:
        view = self.view
        if view is None or view.roofs is None:
            return
        plt, roofs = self.plt, view.roofs
        trace_points = tuple(p for trace in view.traces for p in trace.points)
        ghosts = (view.ghost,) if view.ghost is not None else ()
        x_lo, x_hi, y_lo, y_hi = _limits(roofs, (*view.points, *ghosts, *trace_points))
        ridge = roofs.ridge_flop_per_byte
        xs = [x_lo, ridge, x_hi]
        plt.plot([_log(x) for x in xs], [_log(roofs.roof_flops(x)) for x in xs], marker="braille",
                 color=self._rgb(self.ROOF))
        plt.vertical_line(_log(ridge), color=self._rgb(self.RIDGE))
        under = self._surface()
        plt.text(f" ridge {ridge:,.0f}", _log(ridge), _log(y_lo) + 0.15, color=self._rgb(self.RIDGE), background=under,
                 alignment="left")
        labels = _Labels([(_log(p.intensity_flop_per_byte), _log(p.achieved_flops))
                          for p in (*view.points, *ghosts, *trace_points)],
                         (_log(y_hi) - _log(y_lo)) / max(1, self.size.height - 3),  # a terminal row, in decades
                         (_log(x_hi) - _log(x_lo)) / max(1, self.size.width - 8))  # a column, in decades
        for trace in view.traces:  # a sweep's points under the live ones, each labelled a row under it by its value
            for point in trace.points:
                x, y = _log(point.intensity_flop_per_byte), _log(point.achieved_flops)
                plt.scatter([x], [y], marker=TRACE_MARKER, color=self._colour(point))
        for point in view.points:
            colour = self._colour(point)
            x, y = _log(point.intensity_flop_per_byte), _log(point.achieved_flops)
            plt.scatter([x], [y], marker=MARKERS.get(point.phase, "◆"), color=colour)
            right_side = point.intensity_flop_per_byte < ridge
            plt.text(*labels.place(_label(point), x, y, right_side), color=colour, background=under,
                     alignment="left" if right_side else "right")
        if view.ghost is not None:
            x, y = _log(view.ghost.intensity_flop_per_byte), _log(view.ghost.achieved_flops)
            colour = self._colour(view.ghost)
            plt.scatter([x], [y], marker=GHOST_MARKER, color=colour)
            plt.text(*labels.place(f"{NARROWER_BITS[view.target.bits]} bit", x, y, True), color=colour,
                     background=under, alignment="left")
        for point in trace_points:  # their labels last: they make way for the live points' own
            x, y = _log(point.intensity_flop_per_byte), _log(point.achieved_flops)
            plt.text(*labels.place(_value(point), x, y - labels.row, True, offset=0.0), color=self._colour(point),
                     background=under, alignment="left")
        plt.xlim(_log(x_lo), _log(x_hi))
        plt.ylim(_log(y_lo), _log(y_hi))
        plt.xticks(*_ticks(x_lo, x_hi, ""))
        plt.yticks(*_ticks(y_lo, y_hi, "FLOP/s"))
        plt.xlabel("FLOP per byte read  (log-log: the slope is the bandwidth roof, the flat the compute roof)")

    def _colour(self, point: PhasePoint) -> tuple[int, int, int]:
        return self._rgb({PREFILL: self.PREFILL, DECODE: self.DECODE}.get(point.phase, self.ESTIMATE))

    def _surface(self) -> tuple[int, int, int]:
        """The chart's own background (textual-plotext's theme is the app's surface), under the labels: plotext
        gives a text its canvas colour as the figure is built, before textual-plotext applies the theme."""
        return Color.parse(self.app.theme_variables.get("surface", "black")).rgb


class _Labels:
    """Where each label goes: beside its point, a row lower until it covers no mark and no label drawn before it
    (plotext draws a text over any mark)."""

    def __init__(self, marks: list[tuple[float, float]], row: float, column: float) -> None:
        self.marks, self.row, self.column = marks, row, column
        self.placed: list[tuple[float, float, float]] = []
        """Each label drawn: its row and its first and last column, in decades."""

    def place(self, label: str, x: float, y: float, right_side: bool,
              offset: float = LABEL_OFFSET) -> tuple[str, float, float]:
        """plotext's text arguments (the label, x, y) for a label right of (x, y), or left of it."""
        width = (len(label) + 1) * self.column
        left = x + offset if right_side else x - offset - width
        label_y = y
        for _ in range(MAX_LABEL_MOVES):
            covers_mark = any(abs(my - label_y) < self.row and left <= mx <= left + width for mx, my in self.marks)
            covers_label = any(abs(ly - label_y) < self.row and a < left + width and left < b
                               for ly, a, b in self.placed)
            if not covers_mark and not covers_label:
                break
            label_y -= self.row
        self.placed.append((label_y, left, left + width))
        return label, x + offset if right_side else x - offset, label_y


def _log(value: float) -> float:
    return math.log10(value)


def _limits(roofs: Roofs, points: tuple[PhasePoint, ...]) -> tuple[float, float, float, float]:
    """Whole decades around the ridge and every point: intensity 1 and the ridge × 10 at least."""
    xs = [roofs.ridge_flop_per_byte, 1.0, *(p.intensity_flop_per_byte for p in points)]
    x_lo = 10 ** math.floor(_log(min(xs) / 2))
    x_hi = 10 ** math.ceil(_log(max(xs) * 4))
    ys = [roofs.roof_flops(x_lo), *(p.achieved_flops for p in points)]
    return x_lo, x_hi, 10 ** math.floor(_log(min(ys) / 2)), 10 ** math.ceil(_log(roofs.peak_flops * 2))


def _ticks(low: float, high: float, unit: str) -> tuple[list[float], list[str]]:
    """A tick at each power of ten from `low` to `high`, labelled "100", "1k", "10T"."""
    powers = range(round(_log(low)), round(_log(high)) + 1)
    labels = [f"{_si(10.0 ** p)}{' ' + unit if unit and p == powers[-1] else ''}" for p in powers]
    return [float(p) for p in powers], labels


def _si(value: float) -> str:
    for scale, prefix in PREFIXES:
        if value >= scale:
            return f"{value / scale:g}{prefix}"
    return f"{value:g}"


def _value(point: PhasePoint) -> str:
    """A sweep's point by the value swept: "×8" (its batch) or "2k" (its prompt's tokens)."""
    return f"×{point.batch:g}" if point.batch is not None else _si(float(point.tokens or 0))


def _label(point: PhasePoint) -> str:
    share = f"{point.roof_share * 100:.0f} %"
    if point.phase == DECODE:
        return f"decode ×{point.batch:.3g}: {share}"
    if point.phase == PREFILL:
        return f"prefill {point.tokens:,}: {share}"
    return f"server est.: {share}"
