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
from textual.widgets import Footer, Input, RadioButton, RadioSet, Static
from textual.worker import Worker, WorkerState

from tui.app.widgets.editing import EditInput
from tui.app.widgets.text import set_text
from tui.app.worker_failures import report_failed_worker
from tui.core.serving.serve_command import CommandError, ServeCommand, changed_flags
from tui.core.serving.server_help import (FlagAgainstDefault, against_defaults, complete_flag, defaults_in_help,
                                          flags_in_help, unfinished_flag, value_flags_in_help)
from tui.core.state.tuning_loop import Refusal, RestartRequest
from tui.core.untrusted import one_line, printable
from tui.sources.servers.served_command import read_help

HINT = ("Enter restarts the server with this command (from anywhere here), waits for it, runs what is picked above "
        "again and opens before → after. Tab then the arrows: pick what runs. Escape keeps the server as it is.")
DEFAULTS_READING = "reading the server's --help for its defaults…"


class FlagSuggester(Suggester):
    """Completes the `--flag` being typed from the server's own `--help` (once it has been read)."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.flags: list[str] = []

    async def get_suggestion(self, value: str) -> str | None:
        return complete_flag(value, self.flags)


class RerunPick(RadioSet):
    """What runs again: the arrows pick as they move (Enter is the dialog's: it restarts with what is picked)."""

    BINDINGS = [
        Binding("down,right", "pick(1)", "Next", show=False),
        Binding("up,left", "pick(-1)", "Previous", show=False),
    ]

    def action_pick(self, step: int) -> None:
        (self.action_next_button if step > 0 else self.action_previous_button)()
        self.action_toggle_button()


class FlagEditorScreen(ModalScreen[RestartRequest | None]):
    """Edit `command` (the one running now): each flag beside the server's own default (read from its `--help`),
    those that differ named; what differs from `first` (the one started first) listed; and what runs again after
    the restart, one of `reruns` ((id, label); `rerun` picked, else the first). Opened again after a refused restart,
    it holds the refused command with the server's error (`refusal`), so fixing the typo is one edit. A credential
    on the command line is shown as `***` and put back on Enter: it is never on screen."""

    BINDINGS = [
        # A priority binding: Enter restarts whichever part of the dialog has the focus (the "run again" list's own
        # Enter only picked an entry).
        Binding("enter", "restart", "Restart", priority=True, id="flags.restart",
                tooltip="Restart the server with this command, then run the picked workload again"),
        Binding("escape", "dismiss(None)", "Cancel", id="flags.cancel", tooltip="Keep the server as it is"),
    ]

    def __init__(self, command: ServeCommand, first: ServeCommand, reruns: Sequence[tuple[str, str]],
                 refusal: Refusal | None = None, rerun: str | None = None) -> None:
        super().__init__()
        self._command = command
        self._first = first
        self._reruns = reruns
        self._refusal = refusal
        self._picked = rerun if rerun in (r for r, _ in reruns) else reruns[0][0]
        self._suggester = FlagSuggester()
        self._value_flags: set[str] = set()
        """The help's flags that take a value (bare, they are not whole yet)."""
        self._defaults: dict[str, str] | None = None
        """The server's stated defaults, once its --help was read."""

    def compose(self) -> ComposeResult:
        editing = self._refusal.command if self._refusal is not None else self._command
        with Vertical(id="flags-body"):
            yield Static("Server command", id="flags-title", markup=False)
            if self._refusal is not None:
                yield Static(f"refused: {one_line(self._refusal.error, 300)} · fix it and press Enter, or Escape to "
                             "keep the last good flags", id="flags-refused", markup=False)
            yield EditInput(editing.shown(), id="flags-command", select_on_focus=False, suggester=self._suggester)
            yield Static(DEFAULTS_READING, id="flags-defaults", markup=False)
            yield Static("", id="flags-changed", markup=False)
            yield Static("After the restart, run again:", id="flags-rerun-title", markup=False)
            with RerunPick(id="flags-rerun"):
                for rerun, label in self._reruns:
                    yield RadioButton(Content(label), value=rerun == self._picked, id=f"rerun-{rerun}")
            yield Static(HINT, id="flags-hint", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self._show_changes(self._typed)
        self.query_one("#flags-command", Input).focus()
        self.run_worker(lambda: read_help(self._command), name="help", thread=True, exit_on_error=False)

    @property
    def _typed(self) -> str:
        return self.query_one("#flags-command", Input).value

    @on(Worker.StateChanged)
    def _help_read(self, event: Worker.StateChanged) -> None:
        report_failed_worker(self, event)
        if event.worker.name != "help" or event.state not in (WorkerState.SUCCESS, WorkerState.ERROR):
            return
        text = (event.worker.result if event.state == WorkerState.SUCCESS else "") or ""
        self._suggester.flags = flags_in_help(text)
        self._value_flags = value_flags_in_help(text)
        self._defaults = defaults_in_help(text)
        if self._suggester.flags:
            set_text(self.query_one("#flags-hint", Static),
                     f"{HINT} → completes a flag ({len(self._suggester.flags)} from the server's --help).")
        self._show_changes(self._typed)

    @on(Input.Changed, "#flags-command")
    def _edited(self, event: Input.Changed) -> None:
        self._show_changes(event.value)

    def action_restart(self) -> None:
        unfinished = unfinished_flag(self._typed, self._suggester.flags, self._value_flags)
        if unfinished is not None:
            self.notify(f"{unfinished} is not whole yet: finish it (→ completes a flag) or delete it",
                        title="not restarted", severity="warning", markup=False)
            return
        try:
            command = ServeCommand.parse(self._typed).with_secrets_from(self._command)
        except CommandError as error:
            self.notify(str(error), title="not restarted", severity="error", markup=False)
            return
        pressed = self.query_one(RadioSet).pressed_button
        rerun = pressed.id.removeprefix("rerun-") if pressed is not None and pressed.id else self._reruns[0][0]
        self.dismiss(RestartRequest(command, rerun))

    def _show_changes(self, text: str) -> None:
        """What the typed command changes, less a flag still being typed at its end (no change until it is whole)."""
        unfinished = unfinished_flag(text, self._suggester.flags, self._value_flags)
        settled = text.rstrip()[:-len(unfinished)] if unfinished else text
        try:
            command = ServeCommand.parse(settled).with_secrets_from(self._command)
        except CommandError as error:
            set_text(self.query_one("#flags-changed", Static), str(error))
            return
        changes = changed_flags(self._first, command)
        shown = "changed since the first start: " + "; ".join(changes) if changes else "as first started"
        if unfinished:
            shown += f" (typing {unfinished}: no change until it is whole)"
        set_text(self.query_one("#flags-changed", Static), shown)
        self.query_one("#flags-defaults", Static).update(self._against_defaults(command))

    def _against_defaults(self, command: ServeCommand) -> Content | str:
        """The flags given that differ from the server's defaults, named, then those that do not; plain text (from the
        server and the user), never markup."""
        if self._defaults is None:
            return DEFAULTS_READING
        flags = against_defaults(command, self._defaults)
        if not self._defaults:
            return "the server's --help states no defaults to compare with"
        if not flags:
            return "no flags given: the server runs on its defaults"
        differ = [flag for flag in flags if flag.differs]
        unknown = [flag for flag in flags if flag.differs is None]
        same = [flag for flag in flags if flag.differs is False]
        pieces: list[str | tuple[str, str]] = []
        if differ:
            pieces += [f"{len(differ)} of {len(flags)} differ from the server's defaults: ",
                       *_listed(differ, "bold $accent")]
        elif not unknown:
            pieces.append(f"none of the {len(flags)} flags given differs from the server's defaults")
        if unknown:
            pieces += [" · " if differ else "", f"{len(unknown)} of {len(flags)} against no stated default: ",
                       *_listed(unknown, "")]
        if same and (differ or unknown):
            pieces += [" · as its defaults: ", *_listed(same, "$text-muted")]
        return Content.assemble(*pieces)


def _listed(flags: Sequence[FlagAgainstDefault], style: str) -> list[str | tuple[str, str]]:
    """Flags as "--a 1 (default 2), --b 3 (…)", in `style`."""
    pieces: list[str | tuple[str, str]] = []
    for n, flag in enumerate(flags):
        pieces += [", "] * bool(n) + [(printable(str(flag), 200), style)]
    return pieces
