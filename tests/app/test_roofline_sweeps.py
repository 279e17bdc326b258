"""The last sweep on the roofline screen: the concurrency experiment (key n) run on a simulator, then w draws its rows
as decode's trace, moving right with the batch; a sweep of an earlier server session (before a restart) is not drawn.

The simulator's 300-token context scales the sweep's streams down to 68 tokens each, so it takes a few seconds.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from textual.app import App

import tui.app.app
from tests.app.harness import CEILING, seen_of, settings, shows, wait_for
from tui.app.app import PhasetopApp
from tui.app.lab_messages import ExperimentFinished, SessionIdentified
from tui.app.screens.experiment import ExperimentScreen
from tui.app.screens.main import MainScreen
from tui.app.screens.roofline import RooflineScreen
from tui.core.hardware.roofline_live import live_roofline
from tui.core.hardware.roofline_traces import NOT_TOGETHER
from tui.sources.servers.simulator_server import SimulatorProcess


async def test_the_concurrency_sweep_is_decodes_trace_on_the_roofline(tmp_path):
    seen = []
    with SimulatorProcess.start(["--max-model-len", "300"]) as small:
        app = PhasetopApp(settings(tmp_path / "runs"), small.url, None, CEILING, save_runs=False)
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            main: MainScreen = app.screen
            await wait_for(pilot, lambda: seen_of(seen, SessionIdentified), what="server identified")
            await wait_for(pilot, lambda: main.state.server.simulator_flags is not None, what="the simulator's flags read")
            await pilot.press("n")
            await wait_for(pilot, lambda: shows(app, ExperimentScreen), 5, "experiment screen")
            await wait_for(pilot, lambda: seen_of(seen, ExperimentFinished), 120, "experiment finished")
            [finished] = seen_of(seen, ExperimentFinished)
            assert finished.error is None and [r["streams"] for r in finished.result.rows] == [1, 2, 4, 8, 16, 32]
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is main, 5, "back on the main screen")
            await pilot.press("w")
            await wait_for(pilot, lambda: shows(app, RooflineScreen), 5, "the roofline screen")
            view = app.screen.view
            [trace] = view.traces
            assert trace.vary == "concurrency" and [row.value for row in trace.rows] == [1, 2, 4, 8, 16, 32]
            # A busy 2-core client may read a send late or in clumps (the widest most often, but any of them): that row
            # says so rather than place a point; the others are decode at their own batch.
            assert all(row.point is not None or row.reason == NOT_TOGETHER for row in trace.rows)
            placed = [row for row in trace.rows if row.point is not None]
            assert len(placed) >= 3 and placed[-1].value >= 4 * placed[0].value, trace.rows
            assert all(row.point.batch == row.value for row in placed)
            intensities = [p.intensity_flop_per_byte for p in trace.points]
            assert intensities == sorted(intensities) and intensities[-1] > 1.8 * intensities[0]
            assert all(p.bound == "bandwidth" and p.roof_share < 1.02 for p in trace.points)
            assert trace.reading in view.lines
            assert trace.reading.startswith(f"decode moves right with the batch, ×{placed[0].value} → "), trace.reading
            assert "the last sweeps" in str(app.screen.query_one("#roofline-legend").render())
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is main, 5, "back on the main screen")
            main.state.lab.restarted(("process_start_time_seconds changed",), datetime.now().astimezone())
            assert main.state.lab.sessions.sessions[0].sweeps, "the sweep stays with the session it ran in"
            assert main.roofline_view().traces == ()


class _Host(App):
    """The roofline screen alone, in the app's own styles."""

    CSS_PATH = str(Path(tui.app.app.__file__).with_name("phasetop.tcss"))

    def on_mount(self) -> None:
        self.push_screen(RooflineScreen(live_roofline("no device known", [], None), lambda preset: None))


async def test_a_state_handed_to_a_screen_the_app_took_apart_is_dropped():
    """The app quitting with the roofline open removes its widgets while the main screen may still hand it a state."""
    app = _Host()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await screen.remove_children()
        screen.view = live_roofline("still no device", [], None)
        await pilot.pause()
        assert screen.view.heading == "no roofline: still no device"
