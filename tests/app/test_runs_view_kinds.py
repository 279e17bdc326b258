"""The runs view names each run as `phasetop runs` does (a sweep by its experiment, a UI session with what it sent), and
a summary wider than the room the other columns leave it is clipped there with "…", never cut at the screen's edge."""

from __future__ import annotations

from datetime import UTC, datetime

from textual.widgets import DataTable

from tests.app.harness import shows, wait_for
from tests.app.runs_host import REQUEST, RunsHost
from tui.app.screens.compare import CompareScreen
from tui.app.screens.runs import RunsScreen
from tui.core.measure.records import RequestTiming
from tui.core.measure.sends import Send
from tui.core.runs.run_record import new_run, run_header
from tui.core.runs.sessions import Session, session_run
from tui.runs_store import save_run

T0 = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
IDENTITY = {"url": "http://h:8000", "kind": "openai", "model": "m", "version": "0.33.0"}
FINDING = ("decode falls from 180 tok/s at one stream to 95 tok/s a stream at 32 while the aggregate climbs to 3,040 "
           "tok/s: the batch shares each step's weight read, until the KV cache fills and requests queue")



def sweep_run() -> dict:
    return new_run("sweep", {"vary": "concurrency", "values": [1, 32]}, IDENTITY, [REQUEST], {"finding": FINDING}, T0, T0)


def ui_run() -> dict:
    session = Session(1, T0, IDENTITY["url"], identity=IDENTITY)
    for n, send in enumerate((Send(1, "short 200", None, 200, 1, 128), Send(2, "short 200", None, 200, 1, 128))):
        session.add_send(send, T0.timestamp() + n)
        session.add_request(RequestTiming(ok=True, t_sent_unix=T0.timestamp() + n, token_offsets_s=(0.05, 0.055, 0.061)))
    return session_run(session, T0)


def cells(table: DataTable) -> dict[str, list[str]]:
    """Each row's cells as text, by its kind column."""
    return {str(table.get_row_at(i)[2]): [str(c) for c in table.get_row_at(i)] for i in range(table.row_count)}


async def test_a_sweep_is_named_by_its_experiment_a_ui_session_as_such_and_a_long_summary_ends_in_an_ellipsis(tmp_path):
    sweep, session = sweep_run(), ui_run()
    for run in (sweep, session):
        save_run(run, tmp_path / "runs")
    app = RunsHost(tmp_path / "runs")
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: shows(app, RunsScreen) and app.screen.query_one(DataTable).row_count == 2,
                       what="the runs listed")
        table = app.screen.query_one(DataTable)
        rows = cells(table)
        assert set(rows) == {"sweep: concurrency", "UI session"}
        assert rows["UI session"][5].startswith("2 requests sent as short 200 ×2")
        shown = rows["sweep: concurrency"][5]
        assert shown.endswith("…") and run_header(sweep)["summary"].startswith(shown[:-1])
        assert table.virtual_size.width <= table.scrollable_content_region.width, "the table fits: nothing cut at the edge"

        await pilot.resize_terminal(400, 30)
        await wait_for(pilot, lambda: not cells(table)["sweep: concurrency"][5].endswith("…"), what="room for it all")
        assert cells(table)["sweep: concurrency"][5] == run_header(sweep)["summary"]


async def test_the_compare_view_names_both_runs_kinds(tmp_path):
    session, other = ui_run(), ui_run()
    for run in (session, {**other, "id": f"{other['id']}-b"}):
        save_run(run, tmp_path / "runs")
    app = RunsHost(tmp_path / "runs")
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: shows(app, RunsScreen) and app.screen.query_one(DataTable).row_count == 2,
                       what="the runs listed")
        await pilot.press("space", "down", "space", "enter")
        await wait_for(pilot, lambda: shows(app, CompareScreen), what="compare view")
        runs = str(app.screen.query_one("#compare-runs").render())
        assert runs.count("  UI session  ") == 2
        assert "workloads differ" not in runs, "the same sends on both: compared as they are"


async def test_more_runs_than_rows_leave_the_summary_room_for_the_scrollbar(tmp_path):
    sweep = sweep_run()
    for n in range(40):
        save_run({**sweep, "id": f"{sweep['id']}-{n:02}"}, tmp_path / "runs")
    app = RunsHost(tmp_path / "runs")
    async with app.run_test(size=(120, 20)) as pilot:
        await wait_for(pilot, lambda: shows(app, RunsScreen) and app.screen.query_one(DataTable).row_count == 40,
                       what="the runs listed")
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        assert table.show_vertical_scrollbar
        assert str(table.get_row_at(0)[5]).endswith("…")
        assert table.virtual_size.width <= table.scrollable_content_region.width
