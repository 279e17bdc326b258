"""Real vLLM run by phasetop (`--serve`'s ServedCommand): `f` changes --max-num-batched-tokens, Enter restarts
it on its port, the same request runs again, and before → after names the flag (vLLM publishes it in no metric:
it comes from the process's own command line)."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from tests.app.harness import completed, settings, shows, wait_for
from tests.real_vllm.conftest import CLIENT_TIMEOUT_S, MEASURING_FLAGS
from tests.sources.engine_threads import engine_threads
from tui.app.app import PhasetopApp
from tui.app.screens.compare import CompareScreen
from tui.app.screens.flags import FlagEditorScreen
from tui.core.measure.sends import Send
from tui.core.serving.serve_command import ServeCommand, Setting
from tui.sources.servers.managed_server import free_port
from tui.sources.servers.served_command import ServedCommand, listening, start_served
from tui.sources.servers.vllm_server import (
    default_model,
    default_python,
    server_command,
    server_environment,
)

pytestmark = pytest.mark.real_vllm
START_TIMEOUT_S = 300.0


async def test_f_restarts_real_vllm_with_a_changed_flag_and_compares(monkeypatch):
    for name, value in server_environment().items():  # offline, a small KV cache: as `serve-vllm` runs it
        monkeypatch.setenv(name, value)
    port = free_port()
    argv = server_command(default_python(), default_model(), "127.0.0.1", port,
                          (*MEASURING_FLAGS, "--max-num-batched-tokens", "2048"))
    command = ServeCommand.parse(argv)
    # --renice's path: the engine busy-polls 2 cores; without it the client starves and the figures are its own.
    served = ServedCommand(command, command.url, start_served(command, START_TIMEOUT_S, renice=True), START_TIMEOUT_S,
                           renice=True)
    seen = []
    try:
        app = PhasetopApp(settings(timeout_s=float(CLIENT_TIMEOUT_S)), served.url, save_runs=False, served=served)
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: screen.state.lab.server_info is not None, 120)
            screen.send_requests(Send(screen.state.live.send(1), "short", None, 200, 1, 16))
            await wait_for(pilot, lambda: len(completed(seen)) == 1, 120)
            await pilot.press("f")
            await wait_for(pilot, lambda: shows(app, FlagEditorScreen))
            app.screen.query_one(Input).value = str(command.with_setting(Setting("max-num-batched-tokens", "512")))
            await pilot.press("enter")
            old_pid = served.pid
            await wait_for(pilot, lambda: served.running and served.pid != old_pid, START_TIMEOUT_S)
            await wait_for(pilot, lambda: shows(app, CompareScreen), START_TIMEOUT_S)
            niceness = engine_threads(served.pid)
            assert niceness and set(niceness) == {19}, "the restarted engine is reniced as the first was"
            diff = {(r["key"], r["before"], r["after"]) for r in app.screen.comparison["config_diff"]}
            assert ("max_num_batched_tokens", "2048", "512") in diff
            assert len(completed(seen)) == 2 and all(m.timing.ok for m in completed(seen))
            await pilot.press("escape", "q")
    finally:
        served.stop()
    assert not listening("127.0.0.1", port)
