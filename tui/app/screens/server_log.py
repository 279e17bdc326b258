"""The served command's log: its stdout and stderr as plain text, the newest at the end, filtered as you type."""

from __future__ import annotations

from collections.abc import Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Input, Static, TextArea

from tui.app.widgets.editing import EditInput
from tui.app.widgets.text import set_text
from tui.core.untrusted import printable

REFRESH_S = 1.0
SHOWN_LINES = 2000
"""The log's last lines shown (the server writes to a file; the screen holds no more than this)."""


def matching(lines: list[str], query: str) -> list[str]:
    """The lines that contain `query`, case aside; all of them for an empty query."""
    needle = query.strip().lower()
    return [line for line in lines if needle in line.lower()] if needle else lines


class ServerLogScreen(Screen[None]):
    """`read_log(n)` gives the log's last n lines; the screen reads it again every second."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back", tooltip="Back to the main screen", id="log.back")]

    def __init__(self, read_log: Callable[[int], str], title: str) -> None:
        super().__init__()
        self._read_log = read_log
        self._title = title
        self._shown = ""

    def compose(self) -> ComposeResult:
        yield Static(self._title, id="log-title", markup=False)
        yield EditInput(placeholder="filter: only the lines containing this", id="log-filter")
        yield TextArea(id="log-text", read_only=True, soft_wrap=True, show_cursor=False, highlight_cursor_line=False)
        yield Footer()

    def on_mount(self) -> None:
        self._show()
        self.set_interval(REFRESH_S, self._show)

    @on(Input.Changed, "#log-filter")
    def _filtered(self) -> None:
        self._show()

    def _show(self) -> None:
        lines = printable(self._read_log(SHOWN_LINES)).splitlines()
        query = self.query_one("#log-filter", Input).value
        kept = matching(lines, query)
        shown = "\n".join(kept)
        if shown == self._shown:
            return
        self._shown = shown
        text = self.query_one("#log-text", TextArea)
        text.load_text(shown)
        text.scroll_end(animate=False)
        count = f"{len(kept):,} of {len(lines):,} lines" if query.strip() else f"{len(lines):,} lines"
        set_text(self.query_one("#log-title", Static), f"{self._title} · {count}")
