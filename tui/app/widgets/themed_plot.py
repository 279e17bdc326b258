"""A plotext chart that draws its figure once per replot, in the theme's colours, again on a resize or a new theme."""

from __future__ import annotations

from textual_plotext import PlotextPlot

from tui.core.view.ticks import COMPACT_MANTISSAS, NICE_MANTISSAS, YAxis, tick_labels, y_axis


class ThemedPlot(PlotextPlot):
    """Subclasses draw their figure in `draw` (on a cleared `self.plt`) and call `replot` when their data changed."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._replots = 0
        self._rendered: tuple[tuple, object] | None = None
        """(replot count, size, theme) → the figure built for them: plotext builds the whole figure on every
        render, and a layout pass elsewhere on the screen re-renders the plot without a new replot."""

    def render(self):
        key = (self._replots, self.size, self.app.theme)
        if self._rendered is None or self._rendered[0] != key:
            self._rendered = (key, super().render())
        return self._rendered[1]

    def on_mount(self) -> None:
        self.watch(self.app, "theme", lambda: self.call_after_refresh(self.replot))

    def on_resize(self) -> None:
        self.replot()

    def replot(self) -> None:
        self._replots += 1
        self.plt.clear_data()
        self.plt.clear_figure()
        self.draw()
        self.refresh()

    def draw(self) -> None:
        """Plot the figure on `self.plt`."""
        raise NotImplementedError

    def canvas_rows(self, *, framed: bool, x_labels: bool, captions: int = 0) -> int:
        """The rows plotext leaves for the data, on which it puts the y ticks: the widget's, less a frame's two lines,
        the row of x tick labels, and a row for each caption (a title, an x label), as plotext's build lays them out."""
        return self.size.height - 2 * framed - x_labels - captions

    def draw_y_axis(self, highest: float, rows: int, yside: str = "left", label_columns: int | None = None) -> YAxis:
        """The y axis from zero to over `highest` with round ticks evenly on `rows` (`tui.core.view.ticks`), set on
        the figure; `label_columns`: labels that fit these columns ("15k"), right-aligned so stacked charts line up."""
        compact = label_columns is not None
        axis = y_axis(highest, rows, COMPACT_MANTISSAS if compact else NICE_MANTISSAS)
        labels = tick_labels(axis, compact)
        self.plt.ylim(0, axis.top, yside=yside)
        self.plt.yticks(axis.ticks, [label.rjust(label_columns or 0) for label in labels], yside=yside)
        return axis

    def _rgb(self, component: str) -> tuple[int, int, int]:
        """A component class's colour as RGB: a named plotext colour is an ANSI one, which a pane's opacity
        cannot dim (the server is down)."""
        color = self.get_component_rich_style(component).color
        return tuple(color.get_truecolor()) if color else (255, 255, 255)
