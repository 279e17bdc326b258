"""The flag editor: the served command line, editable; Enter restarts the server with it."""

from __future__ import annotations

import subprocess

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.suggester import Suggester
from textual.widgets import Input, Static
from textual.worker import Worker, WorkerState

from tui.app.widgets.text import set_text
from tui.core.serve_command import CommandError, ServeCommand, changed_flags, complete_flag, flags_in_help, help_argv

HELP_TIMEOUT_S = 90.0
"""`vllm serve --help` imports torch first: tens of seconds on a small CPU."""
HINT = ("Enter restarts the server with this command, waits for it, sends the last prompts again and opens "
        "before → after. Escape keeps the server as it is.")


class FlagSuggester(Suggester):
    """Completes the `--flag` being typed from the server's own `--help` (once it has been read)."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.flags: list[str] = []

    async def get_suggestion(self, value: str) -> str | None:
        return complete_flag(value, self.flags)


def read_flags(command: ServeCommand) -> list[str]:
    """The flag names the server's `--help` lists (blocking: run in a thread); none when it cannot say."""
    try:
        done = subprocess.run(help_argv(command), capture_output=True, text=True, timeout=HELP_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return flags_in_help(done.stdout + done.stderr)


class FlagEditorScreen(ModalScreen[ServeCommand | None]):
    """Edit `command` (the one running now); what differs from `first` (the one started first) is listed. A
    credential on the command line is shown as `***` and put back on Enter: it is never on screen."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="flags.cancel")]

    def __init__(self, command: ServeCommand, first: ServeCommand) -> None:
        super().__init__()
        self._command = command
        self._first = first
        self._suggester = FlagSuggester()

    def compose(self) -> ComposeResult:
        with Vertical(id="flags-body"):
            yield Static("Server command", id="flags-title", markup=False)
            yield Input(self._command.shown(), id="flags-command", select_on_focus=False, suggester=self._suggester)
            yield Static("", id="flags-changed", markup=False)
            yield Static(HINT, id="flags-hint", markup=False)

    def on_mount(self) -> None:
        self._show_changes(self._command.shown())
        self.run_worker(lambda: read_flags(self._command), name="help", thread=True, exit_on_error=False)

    @on(Worker.StateChanged)
    def _help_read(self, event: Worker.StateChanged) -> None:
        if event.worker.name == "help" and event.state == WorkerState.SUCCESS and event.worker.result:
            self._suggester.flags = event.worker.result
            set_text(self.query_one("#flags-hint", Static),
                     f"{HINT} → completes a flag ({len(event.worker.result)} from the server's --help).")

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
