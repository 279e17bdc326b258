"""The tuning loop in the demo: the simulator phasetop started itself is a served command (`ServedSimulator`), so f
edits its flags, Enter starts it again with them on its port, the sends run again and before → after opens."""

from __future__ import annotations

import pytest

from tests.app.harness import settings, shows, wait_for
from tests.app.tuning_steps import edit_flags, long_among_streams
from tui.app.app import PhasetopApp
from tui.app.screens.compare import CompareScreen
from tui.app.screens.server_log import ServerLogScreen
from tui.core.serving.serve_command import ServeCommand, Setting
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sources.servers.managed_server import ServerStartError
from tui.sources.servers.served_command import RestartRefused, ServedSimulator

ARGS = ["--time-scale", "4", "--max-num-batched-tokens", "2048"]


async def test_f_restarts_the_simulator_phasetop_started_with_a_changed_flag_and_compares():
    with SimulatorProcess.start(ARGS) as simulator:
        served = ServedSimulator(simulator, ARGS)
        url = simulator.url
        seen = []
        app = PhasetopApp(settings(), url, "simulated H100 SXM · Llama-3.1-8B", save_runs=False, simulator=simulator,
                          served=served)
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: screen.state.lab.server_info is not None)
            assert screen.why_disabled("edit_flags") is None and screen.why_disabled("server_log") is None
            await long_among_streams(pilot, screen, seen)
            await edit_flags(pilot, app, served.command.with_setting(Setting("max-num-batched-tokens", "256")))
            await wait_for(pilot, lambda: shows(app, CompareScreen), 120)
            diff = {(r["key"], r["before"], r["after"]) for r in app.screen.comparison["config_diff"]}
            assert ("max_num_batched_tokens", "2048", "256") in diff
            assert simulator.url == url and served.command.value("max-num-batched-tokens") == "256"
            await pilot.press("escape", "o")
            await wait_for(pilot, lambda: shows(app, ServerLogScreen))
            await pilot.press("escape", "q")


def test_the_served_simulator_keeps_its_program_and_port_and_says_why_a_flag_fails():
    with SimulatorProcess.start(ARGS) as simulator:
        served = ServedSimulator(simulator, ARGS)
        assert served.command.argv[1:4] == ("-m", "tui", "sim") and served.command.port == int(simulator.url.rsplit(":", 1)[1])
        with pytest.raises(ServerStartError, match="keep --port"):
            served.restart(served.command.with_setting(Setting("port", "1")))
        with pytest.raises(ServerStartError, match="phasetop's simulator"):
            served.restart(ServeCommand(("vllm", "serve", "m", "--port", str(served.command.port))))
        first_pid = served.pid
        with pytest.raises(RestartRefused, match="bogus") as refused:
            served.restart(served.command.with_setting(Setting("max-num-batched-tokens", "bogus")))
        assert refused.value.kept and served.running and served.pid != first_pid, "the last good flags run again"
        assert served.command == served.first and served.url == simulator.url
