"""The simulator phasetop started is killed from outside: reaped at once, said so with its last line, and R starts it again."""

import os
import signal
import time

import psutil
from textual.widgets import Static

from tests.app.harness import settings, shows, wait_for, wait_for_toast
from tests.sources.listener_child import listen
from tui.app.app import PhasetopApp
from tui.app.messages import ServerCameUp
from tui.app.screens.help import HelpScreen
from tui.app.screens.main import MainScreen
from tui.app.widgets.gpu_pane import GpuPane
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sources.host import ListenerFinder


def reaped(pid: int) -> bool:
    """No process with this pid, not even a zombie waiting for its parent."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_DEAD
    except psutil.NoSuchProcess:
        return True


def pane_text(screen: MainScreen) -> str:
    return screen.query_one(GpuPane).text


async def test_a_killed_simulator_is_reaped_reported_and_restarted_with_r():
    seen = []
    simulator = SimulatorProcess.start([])
    app = PhasetopApp(settings(poll={"metrics_interval_s": 0.2, "gpu_interval_s": 0.2}), simulator.url,
                      "simulated H100 SXM · Llama-3.1-8B", None, save_runs=False, simulator=simulator)
    try:
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            await wait_for(pilot, lambda: screen.server.kind == "openai", 60)
            first_pid = simulator.pid
            await wait_for(pilot, lambda: f"(pid {first_pid})" in pane_text(screen), 30)
            url = simulator.url

            os.kill(first_pid, signal.SIGKILL)
            await wait_for(pilot, lambda: screen.simulator_state == "exited", 10)
            assert reaped(first_pid), "the killed simulator is left a zombie"
            await wait_for(pilot, lambda: "the simulator exited (killed by SIGKILL" in pane_text(screen), 10)
            text = pane_text(screen)
            assert "; last said: phasetop" in text and "press R to start it again" in text, text
            assert f"(pid {first_pid})" not in text
            assert screen.query_one(GpuPane).has_class("-server-exited")
            await wait_for_toast(pilot, "killed by SIGKILL", "Press R")

            await pilot.press("question_mark")
            await wait_for(pilot, lambda: shows(app, HelpScreen), 10)
            help_text = str(app.screen.query_one(Static).render())
            assert "Start the server again" in help_text
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is screen, 10)

            came_up = len({id(m) for m in seen if isinstance(m, ServerCameUp)})
            await pilot.press("R")
            await wait_for(pilot, lambda: screen.simulator_state == "running", 60)
            assert simulator.running and simulator.pid != first_pid and simulator.url == url
            await wait_for(pilot, lambda: screen.server.down_since is None and len(
                {id(m) for m in seen if isinstance(m, ServerCameUp)}) > came_up, 30)
            await wait_for(pilot, lambda: f"(pid {simulator.pid})" in pane_text(screen), 30)
            assert "exited" not in pane_text(screen)
            assert not screen.query_one(GpuPane).has_class("-server-exited")
    finally:
        simulator.stop()


async def test_the_restart_key_is_hidden_without_a_simulator_and_idle_while_it_runs(sim_url):
    app = PhasetopApp(settings(), sim_url, None, None, live=False)
    async with app.run_test(size=(120, 40)):
        assert app.screen.check_action("start_server_again", ()) is False
    with SimulatorProcess.start([]) as simulator:
        app = PhasetopApp(settings(), simulator.url, None, None, live=False, simulator=simulator)
        async with app.run_test(size=(120, 40)):
            assert app.screen.check_action("start_server_again", ()) is None  # listed, not usable: it runs


def test_the_launcher_reaps_a_killed_child_and_says_how_it_ended():
    ended = []
    with SimulatorProcess.start([]) as simulator:
        simulator.on_exit = ended.append
        pid, url = simulator.pid, simulator.url
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not ended and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ended and ended[0].startswith("killed by SIGKILL; last said: phasetop"), ended
        assert reaped(pid)
        simulator.restart()
        assert simulator.running and simulator.url == url and simulator.pid != pid
    assert ended == [ended[0]], "a stop asked for is not reported as an exit"


def test_a_stopped_simulator_reports_no_exit():
    ended = []
    simulator = SimulatorProcess.start([])
    simulator.on_exit = ended.append
    pid = simulator.pid
    simulator.stop()
    time.sleep(0.3)  # the reading thread's EOF comes after the stop: give it the chance to (wrongly) report
    assert ended == [] and reaped(pid)


def test_a_zombie_listener_is_no_longer_the_server():
    """A server whose parent has not reaped it yet: psutil calls it running; the pane must not."""
    child, port = listen()
    finder = ListenerFinder(port)
    try:
        assert finder.find()[0].pid == child.pid
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.05)
        process, reason = finder.find()
        assert process is None and "nothing listens" in reason
    finally:
        child.kill()
        child.wait()
