"""The saved runs: a list to move through with the arrow keys, space to pick two, enter to compare them.

Each run is named by its kind (a sweep by its experiment, a UI session with what it sent in its summary), and a
summary longer than the room the other columns leave it is clipped there with "…", never cut at the screen's edge.

Files in the runs dir that are not readable runs are named under the title with their reasons, and a
second file holding an id already listed is listed too, named as a duplicate: one odd file never empties
or breaks the list.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static
from textual.worker import Worker

from tui.app.feeds.runs import compare_runs, list_runs
from tui.app.lab_messages import RunsCompared, RunsScanned
from tui.app.screens.compare import CompareScreen
from tui.app.worker_failures import report_failed_worker
from tui.core.runs.compare_text import started_text
from tui.core.untrusted import one_line
from tui.runs_store import RunListing

PICK_MARKS = ("1", "2")
"""Shown beside the first and second run picked."""
SKIPPED_SHOWN = 5
"""Unreadable files named one a line; more are counted."""
COLUMNS = (" ", "id", "kind", "started (UTC)", "model", "summary")
MIN_SUMMARY_CELLS = 24
"""The summary's column is never narrower: on a narrow screen the table scrolls sideways rather than show less."""


class RunsScreen(Screen[None]):
    """Runs saved in the runs dir, oldest first. Picking two and pressing enter opens the compare view."""

    BINDINGS = [
        Binding("space", "pick", "Pick", tooltip="Pick or unpick the run under the cursor (two make a compare)", id="runs.pick"),
        Binding("enter", "compare", "Compare", tooltip="Compare the two runs picked (older one as before)", id="runs.compare", priority=True),
        Binding("escape", "app.pop_screen", "Back", tooltip="Back to the live view", id="runs.back"),
    ]

    headers: reactive[list[dict]] = reactive(list, always_update=True)
    """The runs listed, oldest first, each with its row `key`: its id, or its path when the id was listed already."""
    picked: reactive[list[str]] = reactive(list, always_update=True)
    """Row keys of the runs picked, in the order picked (two at most)."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory

    def compose(self) -> ComposeResult:
        yield Static(f"Saved runs in {self.directory}   (space picks two, enter compares, escape goes back)",
                     id="runs-title", markup=False)
        yield Static("", id="runs-skipped", markup=False)
        table: DataTable = DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
        table.add_columns(*COLUMNS)
        yield table
        yield Footer()

    def on_mount(self) -> None:
        self.list_saved_runs()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_failed_worker(self, event)

    @work(exclusive=True, group="runs", thread=True, exit_on_error=False)
    def list_saved_runs(self) -> None:
        self.post_message(list_runs(self.directory))

    @work(exclusive=True, group="runs", thread=True, exit_on_error=False)
    def compare_saved_runs(self, before: str, after: str) -> None:
        self.post_message(compare_runs(before, after, self.directory))

    @on(RunsScanned)
    def _listed(self, event: RunsScanned) -> None:
        listing = event.listing
        self.headers = keyed_headers(listing.headers)
        if event.error:
            self.query_one("#runs-title", Static).update(f"Saved runs: {one_line(event.error, 300)}")
        elif not listing.headers:
            none = "No readable runs" if listing.skipped else "No saved runs"
            self.query_one("#runs-title", Static).update(
                f"{none} in {self.directory} yet: probe, bench, sweep, the load dial and UI sessions save them.")
        self.query_one("#runs-skipped", Static).update(odd_files_text(listing))

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

    def on_resize(self, event: events.Resize) -> None:
        self._fill()

    def action_pick(self) -> None:
        table = self.query_one(DataTable)
        if not self.headers or table.cursor_row < 0:
            self.notify("no run to pick: none is saved yet", severity="warning")
            return
        key = self.headers[table.cursor_row]["key"]
        picked = [r for r in self.picked if r != key]
        if len(picked) == len(self.picked):
            picked = [*picked, key][-len(PICK_MARKS):]
        self.picked = picked

    def action_compare(self) -> None:
        if len(self.picked) != 2:
            self.notify("pick two runs with space first", severity="warning")
            return
        picked = sorted((h for h in self.headers if h["key"] in self.picked), key=lambda h: (str(h["started"]), str(h["id"])))
        before, after = picked  # the older is before (ISO times in UTC sort as text, to the millisecond)
        self.compare_saved_runs(str(before["path"]), str(after["path"]))

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        row = table.cursor_row
        rows = []
        for header in self.headers:
            run_id, key = str(header["id"]), header["key"]
            mark = PICK_MARKS[self.picked.index(key)] if key in self.picked else ""
            started = started_text(header.get("started"))
            model = (header.get("server") or {}).get("model")
            # Every cell a Text: DataTable reads a str cell as markup, and a run file's text is not ours.
            rows.append((key, (Text(mark), Text(one_line(run_id, 40)), Text(one_line(str(header.get("kind_name")), 30)),
                               Text(started), Text(one_line(str(model or "-"), 40)),
                               Text(one_line(str(header.get("summary") or ""), 500)))))
        # Widths set from the cells, not measured by the table: it measures on idle, after rows painted at its
        # labels' widths were cached, so every column stayed 4-5 cells wide until the cursor moved.
        widths = [max([len(label), *(cells[n].cell_len for _, cells in rows)]) for n, label in enumerate(COLUMNS)]
        widths[-1] = min(widths[-1], max(MIN_SUMMARY_CELLS, summary_room(table, widths[:-1], len(rows))))
        for _, cells in rows:
            cells[-1].truncate(widths[-1], overflow="ellipsis")
        table.clear(columns=True)
        for label, width in zip(COLUMNS, widths, strict=True):
            table.add_column(label, width=width)
        for key, cells in rows:
            table.add_row(*cells, key=key)
        if self.headers:
            table.move_cursor(row=min(max(row, 0), len(self.headers) - 1))


def summary_room(table: DataTable, widths: list[int], rows: int) -> int:
    """The cells the summary has once the other columns (`widths`, their padding too) are drawn, and the vertical
    scrollbar `rows` more than the table's height bring."""
    scrollbar = table.styles.scrollbar_size_vertical if rows + table.header_height > table.content_region.height else 0
    padding = 2 * table.cell_padding * len(COLUMNS)
    return table.content_region.width - scrollbar - padding - sum(widths)


def keyed_headers(headers: list[dict]) -> list[dict]:
    """The headers, each with a row key unique in the table: the id, or the file's path for a second file with that id."""
    seen: set[str] = set()
    keyed = []
    for header in headers:
        run_id = str(header["id"])
        keyed.append({**header, "key": run_id if run_id not in seen else f"path:{header['path']}"})
        seen.add(run_id)
    return keyed


def odd_files_text(listing: RunListing) -> str:
    """One line per file skipped (its reason) and per id held twice; empty when every file is a run."""
    lines = [f"skipped {_name(error.path)}: {one_line(error.reason, 200)}" for error in listing.skipped]
    lines += [f"{_name(later['path'])} holds the id of {_name(first['path'])}: both listed"
              for first, later in listing.duplicates()]
    if len(lines) > SKIPPED_SHOWN:
        lines = [*lines[:SKIPPED_SHOWN - 1], f"… and {len(lines) - SKIPPED_SHOWN + 1} more (`phasetop runs` names them all)"]
    return "\n".join(lines)


def _name(path: object) -> str:
    return one_line(Path(str(path)).name, 80)
