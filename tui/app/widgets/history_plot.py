"""A time-series chart of `tui.core.telemetry.metric_history` series: the last minutes, the newest point at the right edge."""

from __future__ import annotations

from dataclasses import dataclass

from tui.app.widgets.themed_plot import ThemedPlot
from tui.core.telemetry.metric_history import Series

REPLOT_INTERVAL_S = 0.25
"""Least time between two replots, in the data's own seconds (plotext builds the whole figure each draw).
Data time, not a timer: a recorded feed draws the same chart however fast it is played, and the points
left undrawn (under a quarter second of a 5-minute axis) are drawn with the next one."""
AXIS_SPANS_S = (60.0, 120.0)
"""Shorter x axes while the history is younger than its span, so its first minutes fill the chart."""
TICK_STEPS_S = (15.0, 30.0, 60.0, 120.0, 300.0)
"""Seconds between x ticks: the least that makes at most `MAX_TICK_STEPS` and leaves `TICK_COLUMNS` between two."""
MAX_TICK_STEPS = 5
"""At most this many steps between "now" and the axis' start: "-2m -90s -1m -30s now", not a tick every 15 s."""
Y_CAP = 1e300
"""The highest y drawn: plotext's arithmetic overflows near the float maximum, and a server may send anything
(the value beside the chart shows it as sent)."""
Y_LABEL_COLUMNS = 4
"""Every chart's y labels are this wide, so charts stacked on one x axis line up (`tui.core.view.ticks`' compact
labels fit it: "15k", "1.5M")."""
TICK_COLUMNS = 6
"""Least columns between two x tick labels ("-4m", "now")."""


@dataclass(frozen=True, slots=True)
class Line:
    """One series as drawn: times `scale` (to ms, to %), in a component class's colour."""

    series: Series
    colour: str
    scale: float = 1.0


class HistoryPlot(ThemedPlot):
    """Lines against seconds before the newest point, y from zero with round ticks evenly spaced; an optional
    reference line (a peak), which the pane's text states in figures."""

    FIRST, SECOND, REFERENCE = "history-plot--first", "history-plot--second", "history-plot--reference"
    COMPONENT_CLASSES = {FIRST, SECOND, REFERENCE}
    """The lines' colours, set in the .tcss from the theme (`ThemedPlot._rgb`)."""

    def __init__(self, *, y_max: float | None = None, x_ticks: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self.y_max = y_max
        """A fixed top of the y axis (100 for a percentage); None: a little over the highest value or reference."""
        self.x_ticks = x_ticks
        """Time ticks under the lines; False for a chart above another on the same axis (one row more of lines)."""
        self.lines: list[Line] = []
        """What the chart holds (tests read the series from here)."""
        self.references: list[float] = []
        """Horizontal lines (peaks) drawn across the chart."""
        self._now_unix: float | None = None
        self.drawn_now_unix: float | None = None
        """The newest point's time at the last replot (None: nothing drawn yet)."""

    def show(self, lines: list[Line], now_unix: float | None, references: list[float] | None = None) -> None:
        """Hold these lines up to `now_unix`; draw them when shown and a replot is due."""
        self.lines, self._now_unix, self.references = lines, now_unix, references or []
        due = (self.drawn_now_unix is None or now_unix is None or now_unix < self.drawn_now_unix
               or now_unix - self.drawn_now_unix >= REPLOT_INTERVAL_S)
        if due and self.display:
            self.replot()

    def _span_s(self) -> float | None:
        """The x axis: the least of `AXIS_SPANS_S` that holds the oldest point, else the series' whole span."""
        starts = [line.series.oldest_t for line in self.lines if line.series.oldest_t is not None]
        if self._now_unix is None or not starts:
            return None
        full_s = max(line.series.span_s for line in self.lines)
        age_s = self._now_unix - min(starts)
        return next((span for span in AXIS_SPANS_S if age_s <= span < full_s), full_s)

    def replot(self) -> None:
        self.drawn_now_unix = self._now_unix
        super().replot()

    def draw(self) -> None:
        plt = self.plt
        plt.frame(False)  # a frame and its axes take two of a small chart's few rows
        span_s = self._span_s()
        if span_s is None:
            return
        drawn = [(line, line.series.runs(self._now_unix, line.scale)) for line in self.lines]
        highest = max((value for _, runs in drawn for _, values in runs for value in values), default=0.0)
        needed = self.y_max if self.y_max is not None else min(max(highest, 0.0, *self.references) * 1.1, Y_CAP) or 1.0
        rows = self.canvas_rows(framed=False, x_labels=self.x_ticks)
        top = self.draw_y_axis(needed, rows, label_columns=Y_LABEL_COLUMNS).top
        for line, runs in drawn:
            colour = self._rgb(line.colour)
            for x, values in runs:
                y = [min(max(value, 0.0), top) for value in values]  # from zero, as the axis
                if len(x) == 1:  # a lone point between gaps: a line of one point draws nothing
                    plt.scatter(x, y, marker="braille", color=colour)
                else:
                    plt.plot(x, y, marker="braille", color=colour)
        for reference in self.references:  # in braille, a quarter row fine: a line of box characters would sit on
            level = min(reference, top)     # the nearest tick's row (a 3,350 GB/s peak on the row labelled 4000)
            plt.plot([-span_s, 0], [level, level], marker="braille", color=self._rgb(self.REFERENCE))
        plt.xlim(-span_s, 0)
        plt.xticks(*_x_ticks(span_s, self.size.width - Y_LABEL_COLUMNS) if self.x_ticks else ([],))


def _x_ticks(span_s: float, width: int) -> tuple[list[float], list[str]]:
    """Ticks back from "now" to the axis' start, as many as `width` columns hold apart."""
    step_s = next((step for step in TICK_STEPS_S
                   if span_s / step <= MAX_TICK_STEPS and span_s / step * TICK_COLUMNS <= width), span_s)
    ticks = [-step_s * i for i in range(int(span_s // step_s), -1, -1)]
    return ticks, [_ago(t) for t in ticks]


def _ago(t_s: float) -> str:
    """"now", "-45s", "-2m"."""
    if not t_s:
        return "now"
    return f"-{-t_s / 60:.0f}m" if t_s % 60 == 0 else f"-{-t_s:.0f}s"
