"""The experiment screen at 80x24: every table column, the whole finding, no toast over it, a legend off the plot.

One concurrency experiment (key n, the default plan: about 10 s on the simulator) shared by the checks.
"""

from __future__ import annotations

from textual.geometry import Region
from textual.widgets import DataTable, Static
from textual.widgets._toast import Toast

from tests.app.harness import CEILING, seen_of, settings, shows, text_of, wait_for
from tui.app.app import PhasetopApp
from tui.app.lab_messages import ExperimentFinished, RunSaved, SessionIdentified
from tui.app.screens.experiment import ExperimentChart, ExperimentScreen

SIZE = (80, 24)


async def test_concurrency_at_80x24_shows_every_column_and_the_whole_finding(sim_url, tmp_path):
    seen = []
    app = PhasetopApp(settings(tmp_path / "runs"), sim_url, None, CEILING)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: seen_of(seen, SessionIdentified), what="server identified")
        await pilot.press("n")
        await wait_for(pilot, lambda: shows(app, ExperimentScreen), 5, "experiment screen")
        screen = app.screen
        await wait_for(pilot, lambda: seen_of(seen, ExperimentFinished), 120, "experiment finished")
        await wait_for(pilot, lambda: seen_of(seen, RunSaved), 20, "run saved")
        await pilot.pause(0.3)
        [finished] = seen_of(seen, ExperimentFinished)
        assert finished.error is None and finished.result.finding
        whole = Region(0, 0, *SIZE)

        # The finding: all of its text, wrapped inside the screen, above the footer.
        finding = screen.query_one("#experiment-finding", Static)
        assert text_of(screen, "#experiment-finding") == finished.result.finding
        assert len(finished.result.finding) > SIZE[0] - 2  # long enough that a one-line finding would be cut
        assert finding.region.height >= 2 and whole.contains_region(finding.region)
        shown = "".join(line.text for line in screen._compositor.render_strips()[finding.region.y:finding.region.bottom])
        assert " ".join(shown.split()) == " ".join(finished.result.finding.split())
        footer = screen.query_one("Footer")
        assert not finding.region.overlaps(footer.region)

        # No toast over it: "saved run" is said on the screen's own message line.
        [saved] = seen_of(seen, RunSaved)
        assert saved.error is None
        assert f"saved run {saved.run_id}" in text_of(screen, "#experiment-message")
        assert not [t for t in app.screen.query(Toast) if t.region.overlaps(finding.region)]

        # The table: every column, the last header included, inside the table's visible width.
        table = screen.query_one("#experiment-table", DataTable)
        assert whole.contains_region(table.region) and table.row_count == 6
        assert table.scroll_x == 0 and table.max_scroll_x == 0
        columns = list(table.columns.values())
        right = sum(c.get_render_width(table) for c in columns)
        assert right <= table.scrollable_content_region.width
        assert "TTFT p50" in str(columns[-1].label)
        header = screen._compositor.render_strips()[table.region.y].text
        assert "TTFT p50" in header

        # The chart keeps some rows, and its legend is a line of its own, not drawn on the plot.
        chart = screen.query_one(ExperimentChart)
        legend = screen.query_one("#experiment-legend", Static)
        assert chart.region.height >= 4 and whole.contains_region(chart.region)
        assert not legend.region.overlaps(chart.region)
        assert "aggregate (tok/s)" in text_of(screen, "#experiment-legend")
        assert "ITL p99 (ms)" in text_of(screen, "#experiment-legend")
        plot = "".join(s.text for s in screen._compositor.render_strips()[chart.region.y:chart.region.bottom])
        assert "aggregate" not in plot
