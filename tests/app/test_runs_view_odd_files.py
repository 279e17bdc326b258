"""The runs view: its columns fit their content on first paint; odd files each named on screen with its reason, the
runs still listed, two files with one id both listed (no DuplicateKey), and an empty or unusable runs dir said so."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from textual.widgets import DataTable

from tests.app.harness import shows, text_of, wait_for
from tests.app.runs_host import REQUEST, RunsHost
from tui.app.screens.compare import CompareScreen
from tui.app.screens.runs import RunsScreen
from tui.core.runs.run_record import new_run
from tui.runs_store import save_run




def run_at(minute: int, ttft_s: float = 0.05, model: str = "m") -> dict:
    started = datetime(2026, 4, 1, 9, minute, tzinfo=UTC)
    return new_run("probe", {"max_tokens": 3}, {"url": "http://h:8000", "model": model}, [{**REQUEST, "ttft_s": ttft_s}],
                   {}, started, started)


async def test_every_column_fits_its_content_on_first_paint(tmp_path):
    runs = [run_at(0, model="meta-llama/Llama-3.1-8B-Instruct"), run_at(5, model="meta-llama/Llama-3.1-8B-Instruct")]
    for run in runs:
        save_run(run, tmp_path / "runs")
    app = RunsHost(tmp_path / "runs")
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(pilot, lambda: shows(app, RunsScreen) and app.screen.query_one(DataTable).row_count == 2,
                       what="the runs listed")
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        strips = app.screen._compositor.render_strips()
        painted = "\n".join(strips[y].text for y in range(table.region.y, table.region.bottom))
        for run in runs:
            assert run["id"] in painted, painted
        for whole in ("started (UTC)", "2026-04-01 09:05:00", "meta-llama/Llama-3.1-8B-Instruct", "summary",
                      "decode 180.0 tok/s"):
            assert whole in painted, f"{whole!r} cut: {painted}"


async def test_odd_files_are_named_and_duplicate_ids_both_listed(tmp_path):
    runs_dir = tmp_path / "runs"
    first, second = run_at(0), run_at(5, ttft_s=0.08)
    save_run(first, runs_dir)
    save_run(second, runs_dir)
    (runs_dir / "copy.json").write_text((runs_dir / f"{first['id']}.json").read_text())
    (runs_dir / "odd.json").write_text(json.dumps({"schema": 1, "id": "a", "requests": [1]}))
    app = RunsHost(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: shows(app, RunsScreen), what="runs view")
        table = app.screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 3, what="three runs listed")
        assert sorted(str(table.get_row_at(i)[1]) for i in range(3)) == sorted([first["id"], first["id"], second["id"]])
        odd = text_of(app, "#runs-skipped")
        assert "skipped odd.json: requests[0] is an int where an object was expected" in odd
        assert f"copy.json holds the id of {first['id']}.json: both listed" in odd
        ids = [str(table.get_row_at(i)[1]) for i in range(3)]
        copy_row = max(i for i, run_id in enumerate(ids) if run_id == first["id"])
        await pilot.press(*["down"] * copy_row, "space")  # the duplicate can be picked apart from its original
        second_row = ids.index(second["id"])
        await pilot.press(*(["up"] * (copy_row - second_row) if copy_row > second_row else ["down"] * (second_row - copy_row)), "space")
        assert app.screen.picked == [f"path:{runs_dir / 'copy.json'}", second["id"]]
        assert sorted(str(table.get_row_at(i)[0]) for i in range(3)) == ["", "1", "2"]
        await pilot.press("enter")
        await wait_for(pilot, lambda: shows(app, CompareScreen), what="compare view")


async def test_a_runs_dir_of_only_unreadable_files_says_so(tmp_path):
    runs_dir = tmp_path / "runs"
    runs_dir.mkdir()
    (runs_dir / "x.json").write_text(json.dumps({"schema": 1, "id": "x", "result": [1]}))
    app = RunsHost(runs_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: shows(app, RunsScreen), what="runs view")
        await wait_for(pilot, lambda: "No readable runs" in text_of(app, "#runs-title"), what="the title says none")
        assert text_of(app, "#runs-skipped") == "skipped x.json: result is a list where an object was expected"
        assert app.screen.query_one(DataTable).row_count == 0


async def test_an_empty_runs_dir_and_one_that_is_a_file_are_said(tmp_path):
    for directory, said in ((tmp_path / "empty", "No saved runs in"), (tmp_path / "a-file", "is not a directory")):
        if directory.name == "a-file":
            directory.write_text("")
        else:
            directory.mkdir()
        app = RunsHost(directory)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: shows(app, RunsScreen), what="runs view")
            await wait_for(pilot, lambda: said in text_of(app, "#runs-title"), what=f"the title says {said!r}")
