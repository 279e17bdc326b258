"""The tuning loop's failure paths on real llama-server run by phasetop (`--serve`'s ServedCommand): a flag it refuses
(it prints its usage after the error), and the port taken while it was down. After each the user sees llama-server's
own reason, a server answers (the last good flags, or R once the port is free), and a fixed command restarts it."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, RadioButton

from tests.app.harness import settings, shows, wait_for, wait_for_toast
from tests.app.tuning_steps import restart_with
from tests.real.conftest import CLIENT_TIMEOUT_S, model_path
from tests.sources.listener_child import listen
from tui.app.app import PhasetopApp
from tui.app.screens.flags import FlagEditorScreen
from tui.core.serving.serve_command import ServeCommand, Setting
from tui.core.state.tuning_loop import NOTHING
from tui.sources.servers.llamacpp_server import START_TIMEOUT_S, binary_path, server_command
from tui.sources.servers.managed_server import free_port
from tui.sources.servers.served_command import ServedCommand, listening, start_served

pytestmark = pytest.mark.real_engine


@asynccontextmanager
async def ui_on_llama() -> AsyncIterator[tuple[ServedCommand, int, PhasetopApp, Pilot]]:
    """llama-server run by phasetop (`--serve`) and the UI on it, once the UI has identified it; afterwards the server
    is stopped and its port free."""
    port = free_port()
    command = ServeCommand.parse(server_command(binary_path(), model_path(), "127.0.0.1", port, parallel=2))
    served = ServedCommand(command, command.url, start_served(command, START_TIMEOUT_S), START_TIMEOUT_S)
    try:
        app = PhasetopApp(settings(timeout_s=float(CLIENT_TIMEOUT_S), poll={"metrics_interval_s": 0.5}), served.url,
                          save_runs=False, served=served)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await wait_for(pilot, lambda: app.screen.state.lab.server_info is not None, 60)
            yield served, port, app, pilot
    finally:
        served.stop()
    assert not listening("127.0.0.1", port)


async def test_a_flag_llama_server_refuses_keeps_the_last_good_flags_names_its_error_and_a_fix_restarts_it():
    async with ui_on_llama() as (served, port, app, pilot):
        screen = app.screen
        first_pid = served.pid
        refused = served.command.with_setting(Setting("parallel", "bogus"))
        await restart_with(pilot, app, refused, rerun=NOTHING)  # (the probe's 2,000-token prefill: ~10 s a side)
        # llama-server's error, not the usage hint it prints after it.
        await wait_for_toast(pilot, 'error while handling argument "--parallel"', "kept the last good flags",
                             timeout_s=60)
        await wait_for(pilot, lambda: shows(app, FlagEditorScreen), 10)
        assert app.screen.query_one(Input).value == str(refused), "the editor reopens on the refused command"
        assert served.running and served.command == served.first and served.pid != first_pid
        await wait_for(pilot, lambda: screen.server.down_since is None and screen.state.lab.server_info is not None, 60)
        fixed = served.first.with_setting(Setting("parallel", "3"))
        app.screen.query_one(Input).value = str(fixed)
        app.screen.query_one(f"#rerun-{NOTHING}", RadioButton).value = True
        await pilot.press("enter")
        await wait_for(pilot, lambda: served.command.value("parallel") == "3" and served.running, START_TIMEOUT_S)
        await pilot.press("escape", "q")


async def test_the_port_taken_while_llama_server_was_down_is_said_and_r_starts_it_once_free():
    async with ui_on_llama() as (served, port, app, pilot):
        screen = app.screen
        os.kill(served.pid, signal.SIGKILL)  # it died under the UI…
        await wait_for(pilot, lambda: screen.simulator_state == "exited", 30)
        squatter, _ = listen(port)  # …and another program took its port meanwhile
        try:
            await pilot.press("R")
            await wait_for_toast(pilot, "R tries again", timeout_s=60)
            assert screen.simulator_state == "exited" and screen.why_disabled("start_server_again") is None
        finally:
            squatter.kill()
            squatter.wait()
        await pilot.press("R")
        await wait_for(pilot, lambda: served.running and screen.simulator_state == "running", START_TIMEOUT_S)
        await wait_for(pilot, lambda: screen.server.down_since is None, 60)
        assert served.command == served.first
        await pilot.press("q")
