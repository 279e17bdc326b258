"""Disaggregation in the UI: a request through a 1P1D simulator is drawn in three phases (prefill, KV transfer,
decode) with the transfer named under the timeline; `d` runs the experiment on four setups of phasetop's own
simulator and its table, chart and finding answer "is it worth it?"."""

from __future__ import annotations

import psutil
import pytest

from tests.app.harness import completed, settings, shows, wait_for
from tui.app.app import PhasetopApp
from tui.app.screens.experiment import ExperimentScreen
from tui.app.widgets.timeline_pane import TRANSFER_MARK, TimelinePane
from tui.sources.servers.simulator_server import SimulatorProcess


async def test_a_request_through_1p1d_is_prefill_then_kv_transfer_then_decode():
    # 10 GbE: a 2,000-token prompt's 262 MB take ~210 ms on the link, most of its time to first token.
    with SimulatorProcess.start(["--disaggregated", "--kv-link", "10gbe", "--enable-per-request-metrics"]) as sim:
        seen = []
        app = PhasetopApp(settings(), sim.url, None, None)
        async with app.run_test(size=(160, 45), message_hook=seen.append) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: screen.state.lab.server_info is not None, 30)
            await pilot.press("2")
            await wait_for(pilot, lambda: len(completed(seen)) == 1, 60)
            [done] = completed(seen)
            split = done.timing.server_split
            assert split is not None and split.kv_transfer_s > 0.1 and split.kv_transfer_bytes > 200e6
            pane = screen.query_one(TimelinePane)
            await wait_for(pilot, lambda: pane.drawn is not None and pane.drawn.rows[-1].transfer is not None)
            row = pane.drawn.rows[-1]
            assert row.prefill[0] < row.prefill[1] <= row.transfer[0] + pane.drawn.cell_s, "prefill, then the move"
            assert row.transfer[1] - row.transfer[0] == (
                pytest.approx(split.kv_transfer_s, abs=pane.drawn.cell_s)), "drawn as long as it took"
            assert row.ticks and row.ticks[0] >= row.transfer[1] - pane.drawn.cell_s, "decode after the move"
            assert f"{TRANSFER_MARK} KV transfer" in str(pane.border_subtitle)
            figures = str(screen.query_one("#timeline-figures").render())
            assert "KV transfer" in figures and "MB from the prefill worker to the decode worker" in figures
            await pilot.press("q")


async def test_d_runs_the_disaggregation_experiment_on_four_setups_of_its_own_simulator():
    runs = []
    app = PhasetopApp(settings(), "http://127.0.0.1:1", None, None, save_runs=False)  # no server is needed
    async with app.run_test(size=(160, 45)) as pilot:
        before = {p.pid for p in psutil.Process().children(recursive=True)}
        await pilot.press("d")
        await wait_for(pilot, lambda: shows(app, ExperimentScreen) and app.screen.is_mounted)
        experiment = app.screen
        handed_on = experiment.on_run  # the tuning loop's: it gets the run too
        experiment.on_run = lambda run: (runs.append(run), handed_on(run))
        await wait_for(pilot, lambda: experiment.finding, 240)
        rows = {row["setup_key"]: row for row in experiment.rows}
        assert set(rows) == {"one-device", "chunked", "1p1d", "split"}
        assert rows["1p1d"]["itl_worst_s"] < rows["one-device"]["itl_worst_s"] / 2, "1P1D isolates the streams"
        assert rows["1p1d"]["kv_transfer_s"] > 0 and rows["one-device"]["kv_transfer_s"] is None
        assert rows["split"]["ttft_s"] > rows["one-device"]["ttft_s"], "one device divided against itself"
        assert "InfiniBand NDR" in str(experiment.query_one("#experiment-title").render())
        assert experiment.finding.startswith(("1P1D", "chunks", "one device")), experiment.finding
        [run] = runs
        assert run["params"]["vary"] == "disaggregation" and run["server"]["kv_link"] == "InfiniBand NDR"
        assert len(run["requests"]) == 4 * 9, "each setup: 8 streams and the long prompt"
        await pilot.press("escape")
        meters = {link.pid for link in app.screen.meters.links}  # the screen's own, which timed the experiment
        left = {p.pid for p in psutil.Process().children(recursive=True)} - before - meters
        assert not [p for p in left if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        await pilot.press("q")
