"""The runs view's columns fit their content on first paint, before the cursor ever moves."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from textual.app import App
from textual.widgets import DataTable

import tui.app
from tui.app.screens.runs import RunsScreen
from tui.core.runs import new_run
from tui.runs_store import save_run

TCSS = Path(tui.app.__file__).parent / "phasetop.tcss"
REQUEST = {"ok": True, "ttft_s": 0.05, "itl_s": [0.005, 0.006], "e2e_s": 0.061, "decode_tok_s": 180.0}


class _Host(App):
    CSS_PATH = TCSS

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory

    def on_mount(self) -> None:
        self.push_screen(RunsScreen(self.directory))


def run_at(minute: int) -> dict:
    started = datetime(2026, 4, 1, 9, minute, tzinfo=UTC)
    return new_run("probe", {"max_tokens": 3}, {"url": "http://h:8000", "model": "meta-llama/Llama-3.1-8B-Instruct"},
                   [REQUEST], {}, started, started)


async def test_every_column_fits_its_content_on_first_paint(tmp_path):
    runs = [run_at(0), run_at(5)]
    for run in runs:
        save_run(run, tmp_path / "runs")
    app = _Host(tmp_path / "runs")
    async with app.run_test(size=(160, 30)) as pilot:
        deadline = time.monotonic() + 10
        while not (isinstance(app.screen, RunsScreen) and app.screen.query_one(DataTable).row_count == 2):
            assert time.monotonic() < deadline, "the runs were not listed"
            await pilot.pause(0.05)
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        strips = app.screen._compositor.render_strips()
        painted = "\n".join(strips[y].text for y in range(table.region.y, table.region.bottom))
        for run in runs:
            assert run["id"] in painted, painted
        for whole in ("started (UTC)", "2026-04-01 09:05:00", "meta-llama/Llama-3.1-8B-Instruct", "summary",
                      "decode 180.0 tok/s"):
            assert whole in painted, f"{whole!r} cut: {painted}"
