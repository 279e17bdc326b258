"""The meter process is killed under the UI: the stream in flight ends as a failed request that keeps what was read,
one line says so, and the next send measures through a new meter."""

import os
import signal

from tests.app.harness import completed, settings, wait_for, wait_for_toast
from tui.app.app import PhasetopApp
from tui.app.messages import MeterDied, ServerCameUp
from tui.sources.servers.simulator_server import SimulatorProcess


async def test_a_killed_meter_is_one_line_and_the_next_send_works():
    seen = []
    with SimulatorProcess.start(["--time-scale", "8"]) as sim:  # 8× slower: a stream lasts seconds
        app = PhasetopApp(settings(), sim.url, None, None, save_runs=False)
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            await wait_for(pilot, lambda: any(isinstance(m, ServerCameUp) for m in seen), 30)
            screen = app.screen
            await pilot.press("1")
            await wait_for(pilot, lambda: screen.timings and len(screen.timings[-1].token_offsets_s) >= 3, 30)
            first_pid = screen.meters.links[0].pid
            os.kill(first_pid, signal.SIGKILL)
            await wait_for(pilot, lambda: len(completed(seen)) == 1, 10)
            [died] = completed(seen)
            assert not died.timing.ok and "the meter process died (killed by SIGKILL" in died.timing.error
            assert len(died.timing.token_offsets_s) >= 3, "what was read before it died is kept"
            await wait_for(pilot, lambda: any(isinstance(m, MeterDied) for m in seen), 10)
            await wait_for_toast(pilot, "meter process died", "next send starts a new one")
            assert app.is_running

            await pilot.press("1")
            await wait_for(pilot, lambda: len(completed(seen)) == 2, 60)
            assert completed(seen)[-1].timing.ok
            assert screen.meters.links[0].pid not in (None, first_pid)
            await pilot.press("q")
