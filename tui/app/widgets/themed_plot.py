"""A plotext chart that draws its figure once per replot, in the theme's colours, again on a resize or a new theme."""

from __future__ import annotations

from textual_plotext import PlotextPlot


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

    def _rgb(self, component: str) -> tuple[int, int, int]:
        """A component class's colour as RGB: a named plotext colour is an ANSI one, which a pane's opacity
        cannot dim (the server is down)."""
        color = self.get_component_rich_style(component).color
        return tuple(color.get_truecolor()) if color else (255, 255, 255)
