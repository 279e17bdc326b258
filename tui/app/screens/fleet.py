"""The fleet screen: every serving instance a Prometheus knows, one row each, sortable and filterable by label.

The saturated and the slowest are named above the table and marked in it; the pools and the fleet's merged p99s
are under it. Enter opens the instance under the cursor in the main screen, on the server's own URL (its sends
and its /metrics go to the server itself); Escape comes back. When Prometheus stops answering, the last rows
stay, marked stale, under one line saying why.

Every label, model name and error here is Prometheus's (its targets') text: cells are `Text`, lines go through
`set_text` on markup-free Statics, never into markup.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static
from textual.worker import Worker

from tui.app.feeds.fleet import FLEET_INTERVAL_S, poll_fleet, unreachable_line
from tui.app.fleet_messages import FleetRead, FleetUnreadable
from tui.app.screens.help import HelpScreen
from tui.app.screens.main import MainScreen
from tui.app.screens.main_keys import MAIN_BINDINGS
from tui.app.widgets.editing import EditInput
from tui.app.widgets.text import set_text
from tui.app.worker_failures import report_failed_worker
from tui.config import Settings
from tui.core.fleet.instances import NO_INSTANCES, Fleet, FleetRow, sort_rows
from tui.core.fleet.promql import Matcher
from tui.core.fleet.text import (CELL_SORTS, CELLS, down_lines, gpu_line, kv_transfer_line, merged_text, parse_filter,
                                 pool_line, row_cells, saturated_text, slowest_text)
from tui.core.untrusted import one_line, without_credentials
from tui.sources.instance_scrape import InstanceScraper
from tui.sources.prometheus import prometheus_client
from tui.sources.scrape import MetricsScraper

SORT_CYCLE = ("instance", "role", "status", "running", "waiting", "kv", "ttft", "itl", "gen", "prompt", "dram", "decode",
              "engine", "model", "host")
"""The order `o` steps through the sort columns (`SORT_COLUMNS`' names)."""
TEXT_SORTS = ("instance", "engine", "model", "host", "role", "status")
"""Columns sorted A→Z; the others largest first."""
MARK = "mark"
"""The first column's key: SAT, SLOW or DOWN beside a row the callouts name."""
SORT_LABELS = {"running": "running", "waiting": "waiting", "prompt": "prompt tok/s"}
"""Sorts with no column of their own (`run/wait` shows running and waiting), named in the title."""


def _clock(t_unix: float) -> str:
    return datetime.fromtimestamp(t_unix).strftime("%H:%M:%S")


class FleetTable(DataTable):
    """The fleet's rows; Enter opens the one under the cursor (the footer shows it: DataTable's own Enter is hidden)."""

    BINDINGS = [Binding("enter", "select_cursor", "Open", tooltip="Open this instance in the main screen (Escape comes back)",
                        id="fleet.open")]


OFF_THE_INSTANCE_FOOTER = {"clear", "timeline.view"}
"""The main screen's footer fits 80 columns exactly: "esc Fleet" takes these two's room (the help still lists them)."""


class InstanceScreen(MainScreen):
    """The main screen on one instance of the fleet: sends go to the server itself, its metrics are read through
    Prometheus (the target `job`, `instance`: what the fleet's row shows, on Prometheus's scrapes); Escape goes
    back to the fleet."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Fleet", tooltip="Back to the fleet", id="instance.back"),
                *(replace(binding, show=False) if binding.id in OFF_THE_INSTANCE_FOOTER else binding
                  for binding in MAIN_BINDINGS)]

    def __init__(self, settings: Settings, server_url: str, prometheus_url: str, job: str, instance: str) -> None:
        super().__init__(settings, server_url)
        self._prometheus = prometheus_client(settings, prometheus_url)
        self._target = (job, instance)

    def metrics_scraper(self) -> MetricsScraper:
        return InstanceScraper(self._prometheus, *self._target, self.client, window_s=self.settings.poll.metrics_window_s)

    async def on_unmount(self) -> None:  # Textual calls MainScreen's too (handlers run along the MRO)
        await self._prometheus.aclose()


class FleetScreen(Screen[None]):
    """The fleet, read through Prometheus every few seconds by `poll_fleet`."""

    BINDINGS = [
        Binding("o", "sort(1)", "Sort", tooltip="Sort by the next column (numbers largest first, text A→Z)", id="fleet.sort_next"),
        Binding("O", "sort(-1)", "Sort back", show=False, tooltip="Sort by the column before", id="fleet.sort_back"),
        Binding("slash", "filter", "Filter", key_display="/", id="fleet.filter",
                tooltip="Type a label filter: k=v, k!=v, k=~re, k!~re, spaces between; Enter applies, empty shows all"),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="Every key, with what it does", id="fleet.help"),
    ]

    fleet: reactive[Fleet | None] = reactive(None, always_update=True, repaint=False)
    """The last fleet read (kept, marked stale, while Prometheus does not answer)."""
    sort_column: reactive[str] = reactive("instance", repaint=False)
    """The `SORT_COLUMNS` name the rows are in order of."""
    unreadable: reactive[str | None] = reactive(None, repaint=False)
    """Why the last read failed (one line), None after a good one."""

    save_runs = True
    """Passed on to an instance's main screen (False: the UI's --no-save)."""

    def __init__(self, settings: Settings, prometheus_url: str, live: bool = True) -> None:
        super().__init__()
        self.settings = settings
        self.prometheus_url = prometheus_url
        self.live = live
        """False: no poll starts; tests post the facts themselves."""
        self.matchers: tuple[Matcher, ...] = ()
        """The label filter applied to every query."""
        self.reading = 0
        """Which poll is current: a new filter starts a new one, and an older one's answer is dropped."""
        self.read_to_shown_s: float | None = None
        """Seconds from the start of the last read to its rows in the table (the read itself, then the render)."""
        self.read_at_unix: float | None = None
        self.unreadable_since: float | None = None
        self._rows: list[FleetRow] = []
        self._columns: list[tuple[str, str, int]] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="fleet-title", markup=False)
        yield Static("", id="fleet-error", markup=False)
        yield EditInput(placeholder="label filter: role=decode  job=~\"vllm.*\"  model_name!~\".*1B.*\"  (/ to type, Enter applies)",
                    id="fleet-filter", compact=True)
        yield Static("", id="fleet-callouts", markup=False)
        # The mark and the name stay put while a narrow terminal scrolls the figures sideways.
        yield FleetTable(id="fleet-table", cursor_type="row", zebra_stripes=True, fixed_columns=2)
        yield Static("", id="fleet-pools", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        self._show_title()
        if self.live:
            self._start_poll()

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "fleet")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_failed_worker(self, event)

    def _start_poll(self) -> None:
        self.reading += 1
        self.run_worker(poll_fleet(self.settings, self.prometheus_url, self.matchers, self.reading, self.post_message),
                        group="fleet", exclusive=True, exit_on_error=False)

    # ---- actions -------------------------------------------------------------------------------

    def action_sort(self, step: int) -> None:
        self.sort_column = SORT_CYCLE[(SORT_CYCLE.index(self.sort_column) + step) % len(SORT_CYCLE)]

    def action_filter(self) -> None:
        self.query_one(Input).focus()

    def action_open_instance(self) -> None:
        table = self.query_one(DataTable)
        if self._rows and 0 <= table.cursor_row < len(self._rows):
            self.open_instance(self._rows[table.cursor_row])

    def action_help(self) -> None:
        keys = [(b.binding.key_display or b.binding.key, b.binding.description)
                for b in self.active_bindings.values() if b.binding.description]
        self.app.push_screen(HelpScreen(keys))

    @work(exclusive=True, group="open", exit_on_error=False)
    async def open_instance(self, row: FleetRow) -> None:
        """The main screen on the row's server (its metrics through Prometheus, sends to the server itself); one
        that does not answer from here opens too, saying so: its metrics still come, its sends wait for it."""
        name = one_line(row.key, 60)
        if not row.url:
            self.notify(f"{name}: Prometheus lists no scrape URL for it, so there is nothing to open", severity="warning", markup=False)
            return
        if unreachable := await unreachable_line(row):
            self.notify(unreachable, severity="warning", markup=False)
        screen = InstanceScreen(self.settings, row.url, self.prometheus_url, row.job, row.instance)
        screen.save_runs = self.save_runs
        await self.app.push_screen(screen)

    # ---- intents -------------------------------------------------------------------------------

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_instance()

    @on(DataTable.HeaderSelected)
    def _header_selected(self, event: DataTable.HeaderSelected) -> None:
        sort = CELL_SORTS.get(str(event.column_key.value))
        if sort is not None:
            self.sort_column = sort

    @on(Input.Submitted, "#fleet-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        try:
            matchers = parse_filter(event.value)
        except ValueError as error:
            event.input.add_class("-invalid")
            self.notify(one_line(error, 200), title="not a label filter", severity="error", markup=False)
            return
        event.input.remove_class("-invalid")
        self.query_one(DataTable).focus()
        if matchers != self.matchers:
            self.matchers = matchers
            self._show_title()
            if self.live:
                self._start_poll()

    def on_key(self, event) -> None:
        """Escape in the filter box goes back to the table (the filter as it was applied stays)."""
        if event.key == "escape" and isinstance(self.focused, Input):
            event.stop()
            self.query_one(DataTable).focus()

    # ---- facts ---------------------------------------------------------------------------------

    @on(FleetRead)
    def _read(self, event: FleetRead) -> None:
        if event.reading != self.reading:
            return
        self.unreadable, self.unreadable_since = None, None
        self.read_at_unix = event.fleet.t_unix
        self.fleet = event.fleet
        self.read_to_shown_s = time.monotonic() - event.started

    @on(FleetUnreadable)
    def _unreadable(self, event: FleetUnreadable) -> None:
        if event.reading != self.reading:
            return
        self.unreadable_since = self.unreadable_since or event.since_unix
        self.unreadable = event.reason

    # ---- state to widgets ----------------------------------------------------------------------

    def watch_fleet(self) -> None:
        self._fill()

    def watch_sort_column(self) -> None:
        self._fill()

    def watch_unreadable(self, reason: str | None) -> None:
        error = self.query_one("#fleet-error", Static)
        error.set_class(reason is not None, "-shown")
        self.query_one(DataTable).set_class(reason is not None and self.fleet is not None, "-stale")
        if reason is not None:
            kept = (f" · the rows below are from {_clock(self.read_at_unix)}, stale" if self.fleet is not None
                    else f" · asking again every {FLEET_INTERVAL_S:g} s")
            set_text(error, f"⚠ {one_line(reason, 300)}{kept}")
        self._show_title()

    def _show_title(self) -> None:
        fleet = self.fleet
        parts = [f"Fleet · Prometheus {without_credentials(self.prometheus_url)}"]
        if fleet is not None:
            parts.append(f"{len(fleet.instances)} instance{'s' * (len(fleet.instances) != 1)}")
        if self.matchers:
            parts.append("filter " + " ".join(m.text() for m in self.matchers))
        direction = "A→Z" if self.sort_column in TEXT_SORTS else "largest first"
        parts.append(f"sort: {SORT_LABELS.get(self.sort_column, self._sort_cell() or self.sort_column)} {direction} (o)")
        if self.unreadable is not None:
            parts.append("STALE" if fleet is not None else "no answer yet")
        elif fleet is not None:
            parts.append(f"read {_clock(fleet.t_unix)} in {fleet.read_s or 0:.2f} s")
        else:
            parts.append("reading…")
        set_text(self.query_one("#fleet-title", Static), " · ".join(parts))

    def _sort_cell(self) -> str | None:
        return next((cell for cell, sort in CELL_SORTS.items() if sort == self.sort_column), None)

    def _fill(self) -> None:
        """The table, callouts and pools from the fleet: cells updated in place while the rows and columns stay
        (the cursor and the horizontal scroll stay where the user left them), rebuilt otherwise."""
        self._show_title()
        fleet = self.fleet
        if fleet is None:
            return
        rows = sort_rows(fleet.instances, self.sort_column)
        cells = [self._cells(fleet, r) for r in rows]
        sorted_cell = self._sort_cell()
        arrow = "▲" if self.sort_column in TEXT_SORTS else "▼"
        columns = [(MARK, "", max([0, *(c[MARK].cell_len for c in cells)]))]
        # The host is a column only where it says more than the instance's name (another join label's host).
        shown = [name for name in CELLS if name != "host" or any(r.host and r.host not in r.key for r in rows)]
        for name in shown:
            label = f"{name}{arrow}" if name == sorted_cell else name
            columns.append((name, label, max([len(label), *(c[name].cell_len for c in cells)])))
        table = self.query_one(DataTable)
        keys = [r.key for r in rows]
        if columns == self._columns and keys == [r.key for r in self._rows]:
            for key, row_cells_ in zip(keys, cells):
                for name, _, _ in columns:
                    table.update_cell(key, name, row_cells_[name])
        else:
            at = self._rows[table.cursor_row].key if self._rows and 0 <= table.cursor_row < len(self._rows) else None
            scroll_x = table.scroll_x
            table.clear(columns=columns != self._columns)
            if columns != self._columns:
                for key, label, width in columns:
                    table.add_column(label, key=key, width=width)
            for key, row_cells_ in zip(keys, cells):
                table.add_row(*(row_cells_[name] for name, _, _ in columns), key=key)
            if at in keys:
                table.move_cursor(row=keys.index(at), scroll=False)
            # clear() scrolled home: back to where the user had scrolled a narrow table
            table.call_after_refresh(table.scroll_to, x=scroll_x, animate=False)
        self._rows, self._columns = rows, columns
        callouts = [line for line in (saturated_text(fleet), slowest_text(fleet)) if line]
        set_text(self.query_one("#fleet-callouts", Static), " · ".join(callouts) if callouts else
                 "no instance saturated (none waiting, KV under 90 %)" if rows else
                 NO_INSTANCES)
        self._show_pools(fleet)

    def on_resize(self) -> None:
        if self.fleet is not None:  # once the pools' pane has its new width
            self.call_after_refresh(self._show_pools, self.fleet)

    def _show_pools(self, fleet: Fleet) -> None:
        """The pools' lines (broken between figures at the pane's width), the merged p99s, the down and the GPUs."""
        pools = self.query_one("#fleet-pools", Static)
        lines = [pool_line(p, pools.content_size.width or None) for p in fleet.pools]
        lines += [line for line in (kv_transfer_line(fleet),) if line]
        lines.append(f"{merged_text(fleet)} (quantiles of the summed bucket rates, every instance together)")
        lines += down_lines(sort_rows(fleet.instances, self.sort_column))
        if fleet.gpus:
            lines += ["", "GPUs (DCGM):", *(f"  {gpu_line(g)}" for g in sorted(fleet.gpus, key=lambda g: (g.host or "", g.gpu)))]
        set_text(pools, "\n".join(lines))

    def _cells(self, fleet: Fleet, row: FleetRow) -> dict[str, Text]:
        """The row's cells as Text (a str cell would be read as markup), its mark styled with the theme's colours."""
        colours = self.app.theme_variables
        marks = []
        if row.status == "down":
            marks.append(("DOWN", colours.get("error", "red")))
        elif row.saturated:
            marks.append(("SAT", colours.get("error", "red")))
        if fleet.slowest == row.key:
            marks.append(("SLOW", colours.get("warning", "yellow")))
        mark = Text(" ").join(Text(word, style=f"bold {colour}") for word, colour in marks)
        return {MARK: mark, **{name: Text(value) for name, value in row_cells(row).items()}}
