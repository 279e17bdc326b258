"""The flag editor: the served command line, editable; Enter restarts the server with it."""

from __future__ import annotations

from collections.abc import Sequence

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.suggester import Suggester
from textual.widgets import Input, RadioButton, RadioSet, Static
from textual.worker import Worker, WorkerState

from tui.app.widgets.editing import EditInput
from tui.app.widgets.text import set_text
from tui.app.worker_failures import report_failed_worker
from tui.core.serving.serve_command import CommandError, ServeCommand, changed_flags
from tui.core.serving.server_help import against_defaults, complete_flag, defaults_in_help, flags_in_help
from tui.core.state.tuning_loop import RestartRequest
from tui.core.untrusted import printable
from tui.sources.servers.served_command import read_help

HINT = ("Enter restarts the server with this command, waits for it, runs what is picked below again and opens "
        "before → after. Tab: pick what runs. Escape keeps the server as it is.")
DEFAULTS_READING = "reading the server's --help for its defaults…"


class FlagSuggester(Suggester):
    """Completes the `--flag` being typed from the server's own `--help` (once it has been read)."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.flags: list[str] = []

    async def get_suggestion(self, value: str) -> str | None:
        return complete_flag(value, self.flags)


class FlagEditorScreen(ModalScreen[RestartRequest | None]):
    """Edit `command` (the one running now): each flag beside the server's own default (read from its `--help`),
    those that differ highlighted; what differs from `first` (the one started first) listed; and what runs
    again after the restart, one of `reruns` ((id, label), the first picked). A credential on the command line
    is shown as `***` and put back on Enter: it is never on screen."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="flags.cancel")]

    def __init__(self, command: ServeCommand, first: ServeCommand, reruns: Sequence[tuple[str, str]]) -> None:
        super().__init__()
        self._command = command
        self._first = first
        self._reruns = reruns
        self._suggester = FlagSuggester()
        self._defaults: dict[str, str] | None = None
        """The server's stated defaults, once its --help was read."""

    def compose(self) -> ComposeResult:
        with Vertical(id="flags-body"):
            yield Static("Server command", id="flags-title", markup=False)
            yield EditInput(self._command.shown(), id="flags-command", select_on_focus=False, suggester=self._suggester)
            yield Static(DEFAULTS_READING, id="flags-defaults", markup=False)
            yield Static("", id="flags-changed", markup=False)
            yield Static("After the restart, run again:", id="flags-rerun-title", markup=False)
            with RadioSet(id="flags-rerun"):
                for n, (rerun, label) in enumerate(self._reruns):
                    yield RadioButton(Content(label), value=n == 0, id=f"rerun-{rerun}")
            yield Static(HINT, id="flags-hint", markup=False)

    def on_mount(self) -> None:
        self._show_changes(self._command.shown())
        self.query_one("#flags-command", Input).focus()
        self.run_worker(lambda: read_help(self._command), name="help", thread=True, exit_on_error=False)

    @on(Worker.StateChanged)
    def _help_read(self, event: Worker.StateChanged) -> None:
        report_failed_worker(self, event)
        if event.worker.name != "help" or event.state not in (WorkerState.SUCCESS, WorkerState.ERROR):
            return
        text = event.worker.result if event.state == WorkerState.SUCCESS else ""
        self._suggester.flags = flags_in_help(text or "")
        self._defaults = defaults_in_help(text or "")
        if self._suggester.flags:
            set_text(self.query_one("#flags-hint", Static),
                     f"{HINT} → completes a flag ({len(self._suggester.flags)} from the server's --help).")
        self._show_changes(self.query_one("#flags-command", Input).value)

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
        pressed = self.query_one(RadioSet).pressed_button
        rerun = pressed.id.removeprefix("rerun-") if pressed is not None and pressed.id else self._reruns[0][0]
        self.dismiss(RestartRequest(command, rerun))

    def _show_changes(self, text: str) -> None:
        try:
            command = ServeCommand.parse(text).with_secrets_from(self._command)
        except CommandError as error:
            set_text(self.query_one("#flags-changed", Static), str(error))
            return
        changes = changed_flags(self._first, command)
        shown = "changed since the first start: " + "; ".join(changes) if changes else "as first started"
        set_text(self.query_one("#flags-changed", Static), shown)
        self.query_one("#flags-defaults", Static).update(self._against_defaults(command))

    def _against_defaults(self, command: ServeCommand) -> Content | str:
        """Each flag given, highlighted where it is not the server's default; plain text (from the server and
        the user), never markup."""
        if self._defaults is None:
            return DEFAULTS_READING
        flags = against_defaults(command, self._defaults)
        if not self._defaults:
            return "the server's --help states no defaults to compare with"
        if not flags:
            return "no flags given: the server runs on its defaults"
        pieces: list[str | tuple[str, str]] = [f"{sum(f.differs for f in flags)} of {len(flags)} flags differ from the "
                                               "server's defaults: "]
        for n, flag in enumerate(flags):
            pieces += [" · "] * bool(n) + [(printable(str(flag), 200), "bold $accent" if flag.differs else "$text-muted")]
        return Content.assemble(*pieces)
