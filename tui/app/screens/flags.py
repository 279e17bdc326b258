"""The flag editor: the served command line, editable; Enter restarts the server with it."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from tui.app.widgets.text import set_text
from tui.core.serve_command import CommandError, ServeCommand, changed_flags

HINT = ("Enter restarts the server with this command, waits for it, sends the last prompts again and opens "
        "before → after. Escape keeps the server as it is.")


class FlagEditorScreen(ModalScreen[ServeCommand | None]):
    """Edit `command` (the one running now); what differs from `first` (the one started first) is listed. A
    credential on the command line is shown as `***` and put back on Enter: it is never on screen."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="flags.cancel")]

    def __init__(self, command: ServeCommand, first: ServeCommand) -> None:
        super().__init__()
        self._command = command
        self._first = first

    def compose(self) -> ComposeResult:
        with Vertical(id="flags-body"):
            yield Static("Server command", id="flags-title", markup=False)
            yield Input(self._command.shown(), id="flags-command", select_on_focus=False)
            yield Static("", id="flags-changed", markup=False)
            yield Static(HINT, id="flags-hint", markup=False)

    def on_mount(self) -> None:
        self._show_changes(self._command.shown())

    @on(Input.Changed, "#flags-command")
    def _edited(self, event: Input.Changed) -> None:
        self._show_changes(event.value)

    @on(Input.Submitted, "#flags-command")
    def _submitted(self, event: Input.Submitted) -> None:
        try:
            command = ServeCommand.parse(event.value).with_secrets_from(self._command)
        except CommandError as error:
            self.notify(str(error), title="not restarted", severity="error", markup=False)
            return
        self.dismiss(command)

    def _show_changes(self, text: str) -> None:
        try:
            changes = changed_flags(self._first, ServeCommand.parse(text).with_secrets_from(self._command))
        except CommandError as error:
            changes = [str(error)]
        shown = "changed since the first start: " + "; ".join(changes) if changes else "as first started"
        set_text(self.query_one("#flags-changed", Static), shown)
