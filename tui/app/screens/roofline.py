"""The roofline, live: where this server's prefill and decode sit under its device's compute and bandwidth roofs.

The main screen hands it each new state (`LiveRoofline`, from its requests and scrapes) while it is open; the
points move as sends finish. Everything shown that a server sent (model names) is plain text.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.content import Content
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, Static

from tui.app.widgets.prompt_pane import PRESETS
from tui.app.widgets.roofline_plot import GHOST_MARKER, TRACE_MARKER, RooflinePlot
from tui.core.hardware.roofline_live import LiveRoofline, figures_lines
from tui.core.hardware.roofline_traces import NARROWER_BITS

def legend(view: LiveRoofline) -> Content:
    """The marks the chart draws, in its colours (phasetop's own words only)."""
    marks = "[$warning]●[/] prefill  [$secondary-lighten-3]●[/] decode  [$success]◆[/] the server's estimate"
    if view.ghost is not None:
        marks += (f"  [$secondary-lighten-3]{GHOST_MARKER}[/] decode at {NARROWER_BITS[view.target.bits]} bit, "
                  "projected")
    if view.traces:
        marks += f"  {TRACE_MARKER} the last sweeps (×batch, prompt tokens)"
    return Content.from_markup(marks)


SENDS = Binding.Group("Send")
"""1 2 4 5 take one footer entry."""


class RooflineScreen(Screen[None]):
    """The chart over the readings: each phase's share of the roof above it, what moves it, the estimates beside."""

    BINDINGS = [
        Binding("escape,w", "dismiss", "Back", tooltip="Back to the main screen", id="roofline.back"),
        # The sends its readings name ("2 sends a 2,000-token prompt"), here as on the main screen: the points move as
        # they finish.
        Binding("1", "send('short')", "Short 200", tooltip="Send a 200-token prompt: decode at batch 1",
                id="roofline.short", group=SENDS),
        Binding("2", "send('long')", "Long 2000", tooltip="Send a 2,000-token prompt: its prefill alone",
                id="roofline.long", group=SENDS),
        Binding("4", "send('concurrent')", "8 at once", tooltip="Send 8 prompts at once: decode at batch 8",
                id="roofline.concurrent", group=SENDS),
        Binding("5", "send('many')", "32 at once", tooltip="Send 32 prompts at once: decode at batch 32",
                id="roofline.many", group=SENDS),
    ]

    view: reactive[LiveRoofline | None] = reactive(None, always_update=True, init=False)
    """The roofs and points now; the main screen sets it as its state changes."""

    def __init__(self, view: LiveRoofline, send_preset: Callable[[str], None]) -> None:
        super().__init__()
        self._first = view
        self._send_preset = send_preset
        """Sends one of the main screen's presets by its key name, as its own keys do."""

    def compose(self) -> ComposeResult:
        yield Static(id="roofline-heading", markup=False)
        yield RooflinePlot(id="roofline-plot")
        yield Static(id="roofline-legend")
        yield Static(id="roofline-figures", markup=False)
        yield Static(id="roofline-readings", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.view = self._first

    def action_send(self, preset: str) -> None:
        self._send_preset(preset)
        label = next(p.label for p in PRESETS if p.key == preset)
        self.notify(f"sent {label}: its point moves here once it finishes", timeout=3, markup=False)

    def watch_view(self, view: LiveRoofline | None) -> None:
        if view is None or not self.query(RooflinePlot):  # none: the app quitting with this screen open took it apart
            return
        self.query_one("#roofline-heading", Static).update(f"Roofline · {view.heading}")
        self.query_one(RooflinePlot).show(view)
        self.query_one("#roofline-legend", Static).update(legend(view))
        self.query_one("#roofline-figures", Static).update("\n".join(figures_lines(view)))
        self.query_one("#roofline-readings", Static).update("\n".join(view.lines))
        self.set_class(view.target is None, "-no-target")
