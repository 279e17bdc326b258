"""The tuning loop on the real llama-server: `phasetop tune` starts it once per setting, and in the UI a flag
changed with `f` restarts it through `--serve`'s ServedCommand and compares before with after."""

from __future__ import annotations

import json
import shlex

import pytest
from textual.widgets import Input

from tests.app.harness import completed, settings, shows, wait_for
from tests.loopback import closed_port_url
from tests.real.conftest import model_path
from tui.app.app import PhasetopApp
from tui.app.screens.compare import CompareScreen
from tui.app.screens.flags import FlagEditorScreen
from tui.cli.main import main
from tui.core.measure.sends import Send
from tui.core.serving.serve_command import ServeCommand, Setting
from tui.runs_store import list_runs, load_run
from tui.sources.servers.llamacpp_server import binary_path, server_command
from tui.sources.servers.served_command import ServedCommand, listening, start_served

pytestmark = pytest.mark.real_engine


def llama_command() -> ServeCommand:
    port = int(closed_port_url().rsplit(":", 1)[1])
    return ServeCommand.parse(server_command(binary_path(), model_path(), "127.0.0.1", port, parallel=4, threads=1))


def test_tune_starts_llama_server_for_each_round_and_each_ran_with_its_flag(capsys, tmp_path):
    command = llama_command()
    code = main(["tune", "--serve", shlex.join(command.argv), "--vary", "parallel=1,4", "--optimize", "ttft-p99",
                 "--num-prompts", "4", "--max-concurrency", "4", "--prompt-tokens", "64", "--max-tokens", "8",
                 "--start-timeout", "120", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    document = json.loads(out)
    assert [row["error"] for row in document["rows"]] == [None, None]
    ttft_p99 = [row["figures"]["ttft_s"]["p99"] for row in document["rows"]]
    assert ttft_p99[document["best"]] == min(ttft_p99)
    saved = {header["id"] for header in list_runs(tmp_path / "runs")}
    rounds = {row["settings"]["parallel"]: [row["run_id"], *row["repeat_run_ids"]] for row in document["rows"]}
    assert sorted(rounds) == ["1", "4"] and saved == {i for ids in rounds.values() for i in ids}
    # The server's own command line, read from its process: each round (a fresh start) really ran with its flag.
    for parallel, run_ids in rounds.items():
        assert [load_run(i, tmp_path / "runs")["server"]["command_flags"]["parallel"] for i in run_ids] == \
            [parallel] * len(run_ids)
    assert not listening(command.host, command.port)


async def test_f_restarts_llama_server_with_a_changed_flag_and_compares():
    command = llama_command()
    served = ServedCommand(command, command.url, start_served(command, 120), 120)
    seen = []
    try:
        app = PhasetopApp(settings(), served.url, save_runs=False, served=served)
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: screen.state.lab.server_info is not None, 60)
            screen.send_requests(Send(screen.state.live.send(1), "short", None, 64, 1, 8))
            await wait_for(pilot, lambda: len(completed(seen)) == 1, 120)
            await pilot.press("f")
            await wait_for(pilot, lambda: shows(app, FlagEditorScreen))
            app.screen.query_one(Input).value = str(command.with_setting(Setting("parallel", "2")))
            await pilot.press("enter")
            await wait_for(pilot, lambda: shows(app, CompareScreen), 180)
            diff = {(r["key"], r["before"], r["after"]) for r in app.screen.comparison["config_diff"]}
            assert ("parallel", "4", "2") in diff
            assert len(completed(seen)) == 2 and all(m.timing.ok for m in completed(seen))
            await pilot.press("escape", "q")
    finally:
        served.stop()
    assert not listening(command.host, command.port)
