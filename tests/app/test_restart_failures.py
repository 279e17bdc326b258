"""The tuning loop's failure paths, on phasetop's simulator: a flag the server takes then exits on, a command that
never becomes healthy, the new process killed while it starts, the port taken. After each a server answers (the last
good flags, or R once the way is clear), the user sees why, and the next try works."""

from __future__ import annotations

import os
import shlex
import signal
import sys

from textual.widgets import Input

from tests.app.harness import settings, shows, toasts, wait_for, wait_for_toast
from tests.app.tuning_steps import restart_with
from tests.loopback import closed_port_url
from tests.processes import children, command_line
from tests.sources.listener_child import listen
from tui.app.app import PhasetopApp
from tui.app.screens.flags import FlagEditorScreen
from tui.app.widgets.gpu_pane import GpuPane
from tui.core.serving.serve_command import ServeCommand, Setting
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sources.servers.served_command import ServedCommand, ServedSimulator, start_served

ARGS = ["--max-num-batched-tokens", "2048"]


def main_screen(app: PhasetopApp):
    """The main screen, whatever dialog is open over it (it is the app's first)."""
    return app.screen_stack[0]


async def back_on_the_last_good_flags(pilot, app, served, refused: ServeCommand, *words: str) -> None:
    """The toast says why (`words`) and that the last good flags run; the editor is open again on `refused`; the
    server answers on the last good flags."""
    screen = main_screen(app)
    await wait_for_toast(pilot, *words, "kept the last good flags", timeout_s=60)
    await wait_for(pilot, lambda: shows(app, FlagEditorScreen), 10)
    assert app.screen.query_one(Input).value == str(refused)
    assert served.running and served.command == served.first and screen.simulator_state == "running"
    await wait_for(pilot, lambda: screen.server.down_since is None and screen.state.lab.server_info is not None, 60)


def demo(*args: str) -> tuple[SimulatorProcess, ServedSimulator, PhasetopApp]:
    """The demo's set-up: the simulator phasetop started, served (f restarts it), and the UI on it."""
    simulator = SimulatorProcess.start([*ARGS, *args])
    served = ServedSimulator(simulator, [*ARGS, *args])
    app = PhasetopApp(settings(poll={"metrics_interval_s": 0.2}), simulator.url, "simulated H100 SXM · Llama-3.1-8B",
                      save_runs=False, simulator=simulator, served=served)
    return simulator, served, app


async def test_a_flag_the_simulator_takes_then_exits_on_keeps_the_last_good_flags_and_a_fix_restarts_it():
    simulator, served, app = demo()
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: main_screen(app).state.lab.server_info is not None, 60)
            exits = served.command.with_setting(Setting("gpu-memory-utilization", "0.01"))  # parsed, then no room
            await restart_with(pilot, app, exits)
            await back_on_the_last_good_flags(pilot, app, served, exits, "do not fit")
            app.screen.query_one(Input).value = str(served.first.with_setting(Setting("max-num-seqs", "64")))
            await pilot.press("enter")
            await wait_for(pilot, lambda: served.command.value("max-num-seqs") == "64" and served.running, 60)
            await pilot.press("q")
    finally:
        simulator.stop()


async def test_the_port_taken_while_the_simulator_was_down_is_said_and_r_starts_it_once_free():
    simulator, served, app = demo()
    port = served.command.port
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            screen = main_screen(app)
            await wait_for(pilot, lambda: screen.state.lab.server_info is not None, 60)
            os.kill(simulator.pid, signal.SIGKILL)
            await wait_for(pilot, lambda: screen.simulator_state == "exited", 10)
            squatter, _ = listen(port)  # another program took the port meanwhile
            try:
                await pilot.press("R")
                await wait_for_toast(pilot, "cannot listen", "R tries again", timeout_s=60)
                assert screen.simulator_state == "exited" and screen.why_disabled("start_server_again") is None
                assert "press R to start it again" in screen.query_one(GpuPane).text
            finally:
                squatter.kill()
                squatter.wait()
            await pilot.press("R")
            await wait_for(pilot, lambda: screen.simulator_state == "running" and simulator.running, 60)
            await wait_for(pilot, lambda: screen.server.down_since is None, 60)
            assert served.command == served.first
            await pilot.press("q")
    finally:
        simulator.stop()


NEVER_HEALTHY = ("import sys, http.server as h; "
                 "h.HTTPServer(('127.0.0.1', int(sys.argv[2])), h.BaseHTTPRequestHandler).serve_forever()")
"""A server on `--port P` that answers every GET 501."""
SLOW_START = "import runpy, sys, time; time.sleep(4); sys.argv[0] = 'phasetop'; runpy.run_module('tui', run_name='__main__')"
"""`phasetop` after four seconds asleep: a server that is surely still starting when the test kills it."""


def served_simulator(start_timeout_s: float) -> ServedCommand:
    """`phasetop --serve` on a simulator of its own port; a restart waits `start_timeout_s` for health."""
    port = int(closed_port_url().rsplit(":", 1)[1])
    command = ServeCommand.parse(shlex.join([sys.executable, "-m", "tui", "sim", "--port", str(port), *ARGS]))
    return ServedCommand(command, command.url, start_served(command, 60), start_timeout_s)


async def test_a_command_that_never_becomes_healthy_times_out_and_the_last_good_flags_run_again():
    served = served_simulator(start_timeout_s=3)
    try:
        app = PhasetopApp(settings(poll={"metrics_interval_s": 0.2}), served.url, save_runs=False, served=served)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: main_screen(app).state.lab.server_info is not None, 60)
            # It listens on the port and answers, but never 200 on /health: never healthy.
            mute = ServeCommand.parse(shlex.join([sys.executable, "-c", NEVER_HEALTHY, "--port", str(served.command.port)]))
            await restart_with(pilot, app, mute)
            await back_on_the_last_good_flags(pilot, app, served, mute, "was not healthy after 3 s")
            await pilot.press("escape", "q")
    finally:
        served.stop()


async def test_the_new_server_killed_while_it_starts_leaves_the_last_good_flags_running():
    served = served_simulator(start_timeout_s=60)
    try:
        app = PhasetopApp(settings(poll={"metrics_interval_s": 0.2}), served.url, save_runs=False, served=served)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: main_screen(app).state.lab.server_info is not None, 60)
            port = str(served.command.port)
            changed = ServeCommand((sys.executable, "-c", SLOW_START, "sim", "--port", port, *ARGS, "--max-num-seqs", "64"))
            await restart_with(pilot, app, changed)
            starting = []

            def the_new_one_started() -> bool:
                starting[:] = [p for p in children(os.getpid())
                               if {"64", "--max-num-seqs"} <= set(command_line(p))]
                return bool(starting)

            await wait_for(pilot, the_new_one_started, 30)
            starting[0].kill()  # kill -9 during the restart
            await back_on_the_last_good_flags(pilot, app, served, changed, "exited while starting (status -9)")
            assert not any("Traceback" in toast for toast in toasts(app))
            await pilot.press("enter")  # the same command again, now left alone: it restarts
            await wait_for(pilot, lambda: served.command == changed and served.running, 60)
            await pilot.press("q")
    finally:
        served.stop()
