"""The Textual app: composes the main screen, binds quit, and lists every action in the palette."""

from __future__ import annotations

import gc
import socket
from collections.abc import Iterable
from functools import partial
from pathlib import Path

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.theme import Theme

from tui.app.screens.main import MainScreen
from tui.app.themes import THEMES
from tui.config import Settings
from tui.config_file import remember_setting
from tui.core.untrusted import printable
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sources.servers.served_command import ServedProcess

class PhasetopApp(App[None]):
    """phasetop's UI. It is handed its settings and the server URL; it reads no globals."""

    CSS_PATH = "phasetop.tcss"
    TITLE = "phasetop"
    BINDINGS = [Binding("q", "quit", "Quit", tooltip="Quit (a simulator phasetop started is stopped)", id="quit")]

    def __init__(self, settings: Settings, server_url: str, simulated: str | None = None,
                 ceiling: tuple[float, float, float] | None = None, live: bool = True, save_runs: bool = True,
                 simulator: SimulatorProcess | None = None, served: ServedProcess | None = None, first: Screen | None = None,
                 theme_file: Path | None = None, traces: socket.socket | None = None) -> None:
        super().__init__()
        for theme in THEMES:
            self.register_theme(theme)
        self._theme_setting = settings.theme
        self._theme_file = theme_file
        """The config file a theme picked in the UI is written to (None: not remembered, as in tests)."""
        self._first = first
        """Opened instead of the main screen: the fleet screen (`phasetop --prometheus`), which opens one per instance."""
        self._main: MainScreen | None = None
        if first is None:
            self._main = MainScreen(settings, server_url, simulated, ceiling, live)
            self._main.save_runs = save_runs
            self._main.simulator = simulator
            self._main.served = served
            self._main.traces = traces

    def get_default_screen(self) -> Screen:
        """The main screen (or the fleet's) is the first on the stack: no blank screen is built and painted first."""
        return self._first or self._main

    def on_mount(self) -> None:
        self.theme = self._theme_setting
        self.theme_changed_signal.subscribe(self, self._remember_theme)
        self.call_after_refresh(self._settled)

    def _settled(self) -> None:
        """What start-up built lives as long as the app: kept out of the collector (a full collection's pause fell
        from 104 ms to 15–40 ms), which runs again from here (`tui.entry` held it off during start-up)."""
        gc.freeze()
        gc.enable()

    def watch_app_focus(self, focused: bool) -> None:
        """A UI that started without the terminal's focus (a browser tab not yet focused) gave no pane the focus
        and drew no keys in the footer, and a key or click brings the focus back without redrawing them: so on its
        return the first pane takes the focus where none has it, and the footer draws the keys."""
        if not focused or not self.screen_stack:  # (none while the app starts or quits)
            return
        if self.screen.focused is None:
            self.screen.focus_next()
        self.screen.refresh_bindings()

    def _remember_theme(self, theme: Theme) -> None:
        """A theme the user picked becomes the setting, so the next start (a browser tab's too) opens in it."""
        if self._theme_file is None or theme.name == self._theme_setting:
            return
        try:
            remember_setting(self._theme_file, "theme", theme.name)
        except (OSError, ValueError) as error:
            self.notify(f"{theme.name} is not remembered: {error}", title="theme", severity="warning")
            return
        self._theme_setting = theme.name

    async def run_action(self, action: str, default_namespace=None, namespaces=None) -> bool:
        """A key whose action cannot act now says why in a toast (its target's `why_disabled`), not nothing."""
        target, name, params = self._parse_action(action, self if default_namespace is None else default_namespace, namespaces)
        why_disabled = getattr(target, "why_disabled", None)
        reason = why_disabled(name) if why_disabled is not None and target.check_action(name, params) is None else None
        if reason:
            self.notify(reason, title="not now", severity="warning")
            return True
        return await super().run_action(action, default_namespace, namespaces)

    def notify(self, message: str, *, title: str = "", **kwargs) -> None:
        """Every toast (screens' too: theirs call this) through `printable`: it often carries a server's words."""
        super().notify(printable(message), title=printable(title), **kwargs)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        main = screen if isinstance(screen, MainScreen) else self._main  # an instance of the fleet, on top, is its own
        if main is None:  # the fleet screen, with no main screen under it: its own keys
            for binding in screen.BINDINGS:
                if isinstance(binding, Binding) and binding.description and binding.action != "help":
                    yield SystemCommand(binding.description, binding.tooltip, partial(screen.run_action, binding.action))
            return
        for binding in type(main).BINDINGS:
            name = binding.action.partition("(")[0]
            # An action the screen hides (check_action False: R with no simulator of phasetop's) stays out.
            if name != "help" and main.check_action(name, ()) is not False:
                yield SystemCommand(binding.description, binding.tooltip, partial(main.run_action, binding.action))
