"""Real vLLM restarted on its port with new flags, under a running `metrics`, the open UI and two probes:
each notices the new process, names what changed, and keeps what it measured before."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time

import pytest
from textual.widgets import Static

from tests.app.harness import completed, settings, wait_for
from tests.real_vllm.conftest import (
    CLIENT_TIMEOUT_S,
    MEASURING_FLAGS,
    phasetop_json,
    start_vllm,
)
from tui.app.app import PhasetopApp
from tui.app.messages import MetricsScraped
from tui.app.screens.main import MainScreen
from tui.sources.servers.managed_server import free_port

pytestmark = pytest.mark.real_vllm

NEW_FLAGS = ("--max-num-batched-tokens", "512", "--no-enable-prefix-caching")


async def test_a_restart_with_new_flags_is_seen_by_metrics_the_ui_and_compare(capsys, tmp_path):
    port = free_port()
    first = start_vllm(port=port)
    second = None
    metrics = subprocess.Popen(
        [sys.executable, "-m", "tui", "metrics", "--url", first.url, "--count", "1000", "--interval", "1",
         "--down-timeout", "600", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics_started = time.monotonic()
    seen = []
    app = PhasetopApp(settings(poll={"metrics_interval_s": 0.5}, timeout_s=float(CLIENT_TIMEOUT_S)), first.url, None, None)
    try:
        # The CLI runs its own event loop: off the test's loop, in a thread.
        code, before, err = await asyncio.to_thread(phasetop_json, capsys, "probe", "--url", first.url, "--prompt-tokens", "200",
                                          "--max-tokens", "32", "--repeat", "2", "--timeout", CLIENT_TIMEOUT_S)
        assert code == 0, err
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            await wait_for(pilot, lambda: "enable_prefix_caching=True" in (screen.server.config or ""), 120)
            await pilot.press("1")
            await wait_for(pilot, lambda: len(completed(seen)) == 1, 120)
            # The metrics CLI (started with the server, scraping every second) gets a few scrapes of the first
            # process in however fast this part ran: its start-up alone is about a second.
            await wait_for(pilot, lambda: time.monotonic() - metrics_started > 5, 30)

            first.stop()
            await wait_for(pilot, lambda: screen.server.down_since is not None, 60)
            assert "DOWN since" in str(screen.query_one("#status", Static).render())
            second = start_vllm((*MEASURING_FLAGS, *NEW_FLAGS), port=port)
            await wait_for(pilot, lambda: screen.server.down_since is None
                           and "enable_prefix_caching=False" in (screen.server.config or ""), 120)
            restarts = [m.snapshot.restart for m in seen if isinstance(m, MetricsScraped) and m.snapshot.restart]
            assert restarts and restarts[0].config_changes["enable_prefix_caching"] == ("True", "False")
            await pilot.press("1")
            await wait_for(pilot, lambda: len(completed(seen)) == 2, 120)
            assert completed(seen)[1].timing.ok

        code, after, err = await asyncio.to_thread(phasetop_json, capsys, "probe", "--url", second.url, "--prompt-tokens", "200",
                                         "--max-tokens", "32", "--repeat", "2", "--timeout", CLIENT_TIMEOUT_S)
        assert code == 0, err
        time.sleep(3)  # a few scrapes of the new process
        metrics.send_signal(signal.SIGINT)
        out, err = metrics.communicate(timeout=60)
        watched = json.loads(out)
    finally:
        metrics.kill()
        for server in (first, second):
            if server is not None:
                server.stop()

    # metrics rode through: snapshots on both sides of the down period, every one kept, the restart marked.
    snapshots = watched["snapshots"]
    assert watched["interrupted"] and watched["error"] is None
    assert len(watched["down"]) == 1 and watched["down"][0]["until_unix"] is not None
    marked = [s for s in snapshots if s["restart"]]
    assert len(marked) == 1
    changes = marked[0]["restart"]["config_changes"]
    assert changes["enable_prefix_caching"] == {"old": "True", "new": "False"}, changes
    assert marked[0]["down_before"] is not None
    index = snapshots.index(marked[0])
    assert index >= 2 and len(snapshots) - index >= 2
    assert max(s["generation_tokens_total"] for s in snapshots[:index]) >= 2 * 32  # the first process's work, kept

    # compare: the two probes' runs (the UI saved its sessions beside them), the restart and the flag named.
    probes = sorted((json.loads(path.read_text()) for path in (tmp_path / "runs").glob("*.json")), key=lambda r: r["started"])
    older, newer = [run["id"] for run in probes if run["kind"] == "probe" and "repeat" in run["params"]]
    code, comparison, err = await asyncio.to_thread(phasetop_json, capsys, "compare", older, newer)
    assert code == 0, err
    assert comparison["restarted"] is True
    diff = {row["key"]: (row["before"], row["after"]) for row in comparison["config_diff"]}
    assert diff["enable_prefix_caching"] == ("True", "False"), diff
    assert diff["max_num_batched_tokens"][1] == "512", diff  # from the server's command line: in no metric
    assert before["requests"][0]["prompt_tokens"] == after["requests"][0]["prompt_tokens"] == 200
