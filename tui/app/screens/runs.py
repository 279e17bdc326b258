"""The saved runs: a list to move through with the arrow keys, space to pick two, enter to compare them."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from tui.app.lab_messages import RunsCompared, RunsListed
from tui.app.screens.compare import CompareScreen
from tui.core.compare_text import started_text
from tui.core.sessions import compare_sessions
from tui.core.untrusted import one_line
from tui.runs_store import RunStoreError, list_runs, load_run

PICK_MARKS = ("1", "2")
"""Shown beside the first and second run picked."""


class RunsScreen(Screen[None]):
    """Runs saved in the runs dir, oldest first. Picking two and pressing enter opens the compare view."""

    BINDINGS = [
        Binding("space", "pick", "Pick", tooltip="Pick or unpick the run under the cursor (two make a compare)", id="runs.pick"),
        Binding("enter", "compare", "Compare", tooltip="Compare the two runs picked (older one as before)", id="runs.compare", priority=True),
        Binding("escape", "app.pop_screen", "Back", tooltip="Back to the live view", id="runs.back"),
    ]

    headers: reactive[list[dict]] = reactive(list, always_update=True)
    """The runs listed, oldest first."""
    picked: reactive[list[str]] = reactive(list, always_update=True)
    """Ids of the runs picked, in the order picked (two at most)."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory

    def compose(self) -> ComposeResult:
        yield Static(f"Saved runs in {self.directory}   (space picks two, enter compares, escape goes back)",
                     id="runs-title", markup=False)
        table: DataTable = DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
        table.add_columns(" ", "id", "kind", "started (UTC)", "model", "summary")
        yield table
        yield Footer()

    def on_mount(self) -> None:
        self.list_saved_runs()

    @work(exclusive=True, group="runs", thread=True, exit_on_error=False)
    def list_saved_runs(self) -> None:
        self.post_message(RunsListed(list_runs(self.directory)))

    @work(exclusive=True, group="runs", thread=True, exit_on_error=False)
    def compare_saved_runs(self, before: str, after: str) -> None:
        """Read the two run files (paths) and compare them."""
        try:
            runs = [load_run(path, self.directory) for path in (before, after)]
        except RunStoreError as error:
            self.post_message(RunsCompared(None, str(error)))
            return
        self.post_message(RunsCompared(compare_sessions(*runs)))

    @on(RunsListed)
    def _listed(self, event: RunsListed) -> None:
        self.headers = event.headers
        if not event.headers:
            self.query_one("#runs-title", Static).update(
                f"No saved runs in {self.directory} yet: probe, bench, sweep, the load dial and UI sessions save them.")

    @on(RunsCompared)
    def _compared(self, event: RunsCompared) -> None:
        if event.comparison is None:
            self.notify(event.error or "cannot read the runs", title="not compared", severity="error", markup=False)
            return
        self.app.push_screen(CompareScreen(event.comparison, "Compare two saved runs"))

    def watch_headers(self) -> None:
        self._fill()

    def watch_picked(self) -> None:
        self._fill()

    def action_pick(self) -> None:
        table = self.query_one(DataTable)
        if not self.headers or table.cursor_row < 0:
            return
        run_id = str(self.headers[table.cursor_row]["id"])
        picked = [r for r in self.picked if r != run_id]
        if len(picked) == len(self.picked):
            picked = [*picked, run_id][-len(PICK_MARKS):]
        self.picked = picked

    def action_compare(self) -> None:
        if len(self.picked) != 2:
            self.notify("pick two runs with space first", severity="warning")
            return
        picked = sorted((h for h in self.headers if str(h["id"]) in self.picked), key=lambda h: (str(h["started"]), str(h["id"])))
        before, after = picked  # the older is before (ISO times in UTC sort as text, to the millisecond)
        self.compare_saved_runs(str(before["path"]), str(after["path"]))

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        row = table.cursor_row
        table.clear()
        for header in self.headers:
            run_id = str(header["id"])
            mark = PICK_MARKS[self.picked.index(run_id)] if run_id in self.picked else ""
            started = started_text(header.get("started"))
            model = (header.get("server") or {}).get("model")
            # Every cell a Text: DataTable reads a str cell as markup, and a run file's text is not ours.
            table.add_row(mark, Text(one_line(run_id, 40)), Text(one_line(str(header.get("kind")), 10)), Text(started),
                          Text(one_line(str(model or "-"), 40)), Text(one_line(str(header.get("summary") or ""), 120)),
                          key=run_id)
        if self.headers:
            table.move_cursor(row=min(max(row, 0), len(self.headers) - 1))
