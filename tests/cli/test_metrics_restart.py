"""`phasetop metrics` rides through the server going away: a simulator restarted on its port with other flags,
a fixture server that stops answering, answers 503 for a while, or turns its /metrics off; and Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest

from tests.fixtures.metrics_server import MetricsServer, bump, fixture
from tests.loopback import free_port
from tui.cli.main import main
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sources.scrape import MetricsScraper

INTERVAL_S = 0.2


def wait_until(condition, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def metrics_cli(*argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tui", "metrics", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def generate(url: str, max_tokens: int) -> int:
    """One completion on the server, so its counters stand above zero; returns the tokens it generated."""
    with httpx.Client(base_url=url, timeout=60) as client:
        model = client.get("/v1/models").json()["data"][0]["id"]
        answer = client.post("/v1/completions", json={"model": model, "prompt": "hello there", "max_tokens": max_tokens})
        return answer.json()["usage"]["completion_tokens"]


def test_json_rides_through_a_restart_with_new_flags(capsys, monkeypatch):
    """Baseline and two snapshots from the first simulator, then it stops; a second one with prefix caching
    off comes up on the same port; the run goes on to its count and names the restart and the change."""
    reads = {"ok": 0, "failed": 0}
    read = MetricsScraper.read

    async def counted_read(self):  # counts the real scrapes, so the restart lands at a known point
        try:
            snapshot = await read(self)
        except Exception:
            reads["failed"] += 1
            raise
        reads["ok"] += 1
        return snapshot

    monkeypatch.setattr(MetricsScraper, "read", counted_read)
    port = free_port()
    first = SimulatorProcess.start(["--port", str(port)])
    servers = [first]
    generated = generate(first.url, 16)

    def restart() -> None:
        wait_until(lambda: reads["ok"] >= 3)
        first.stop()
        wait_until(lambda: reads["failed"] >= 2)
        servers.append(SimulatorProcess.start(["--port", str(port), "--no-enable-prefix-caching"]))

    restarter = threading.Thread(target=restart, daemon=True)
    restarter.start()
    try:
        code = main(["metrics", "--url", first.url, "--count", "8", "--interval", str(INTERVAL_S), "--json",
                     "--down-timeout", "60"])
        restarter.join(60)
    finally:
        for server in servers:
            server.stop()
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    snapshots = doc["snapshots"]
    assert len(snapshots) == 8, "--count counts snapshots taken, not failed scrapes"
    marked = [i for i, s in enumerate(snapshots) if s["restart"] is not None]
    assert len(marked) == 1
    [k] = marked
    assert k >= 2, "the first server's snapshots are kept"
    before, after = snapshots[:k], snapshots[k:]
    assert all(s["generation_tokens_total"] == generated > 0 for s in before)
    assert all(s["generation_tokens_total"] == 0 for s in after), "the new process counts from zero"
    restart = snapshots[k]["restart"]
    assert "process_start_time_seconds changed" in restart["reasons"]
    assert restart["config_changes"]["enable_prefix_caching"] == {"old": "True", "new": "False"}
    assert snapshots[k]["engine_config"]["enable_prefix_caching"] == "False"
    for s in snapshots:
        assert all(s[r] is None or s[r] >= 0 for r in ("prompt_tok_s", "generation_tok_s", "preemptions_per_s")), s
    [down] = doc["down"]
    assert snapshots[k]["down_before"] == down
    assert all(s["down_before"] is None for i, s in enumerate(snapshots) if i != k)
    assert down["until_unix"] > down["since_unix"] > before[-1]["t_unix"]
    assert down["until_unix"] <= snapshots[k]["t_unix"]
    assert doc["server_down_s"] == down["down_s"] > 0
    assert down["failed_scrapes"] >= 2 and "connection refused" in down["reason"]
    assert down["failed_scrapes"] >= down["down_s"] / (2 * INTERVAL_S), "retries at most --interval apart"
    assert doc["error"] is None and doc["interrupted"] is False
    assert doc["generation_tokens_total"] == 0 and doc["t_unix"] == snapshots[-1]["t_unix"]


def test_text_rides_through_a_restart_with_new_flags():
    port = free_port()
    first = SimulatorProcess.start(["--port", str(port)])
    second = None
    cli = metrics_cli("--url", first.url, "--count", "6", "--interval", str(INTERVAL_S), "--down-timeout", "60")
    try:
        seen = []
        while sum(line.startswith("vllm metrics") for line in seen) < 2:
            line = cli.stdout.readline()
            assert line, f"the CLI ended early: {cli.stderr.read()}"
            seen.append(line)
        first.stop()
        second = SimulatorProcess.start(["--port", str(port), "--no-enable-prefix-caching"])
        out, err = cli.communicate(timeout=60)
    finally:
        first.stop()
        if second is not None:
            second.stop()
        if cli.poll() is None:
            cli.kill()
    text = "".join(seen) + out
    assert cli.returncode == 0, err
    assert sum(line.startswith("vllm metrics") for line in text.splitlines()) == 6
    assert "server down since" in text and "connection refused" in text
    assert "server back after" in text
    [restarted] = [line for line in text.splitlines() if "server restarted" in line]
    assert "process_start_time_seconds changed" in restarted and "enable_prefix_caching True→False" in restarted
    assert text.index("server down since") < text.index("server back after") < text.index("server restarted")
    assert err == ""


def test_down_for_longer_than_the_timeout_prints_what_was_measured_then_fails():
    base = fixture("llamacpp.txt")
    bodies = [base, bump(base, {"llamacpp:tokens_predicted_total": 10}), bump(base, {"llamacpp:tokens_predicted_total": 20})]
    with MetricsServer(bodies) as server:
        cli = metrics_cli("--url", server.url, "--count", "100", "--interval", "0.1", "--json", "--down-timeout", "1")
        wait_until(lambda: server.metrics_requests >= 4)  # the first three answered: a baseline and two snapshots
    out, err = cli.communicate(timeout=60)
    assert cli.returncode == 1, err
    doc = json.loads(out)
    assert len(doc["snapshots"]) >= 2 and doc["snapshots"][0]["generation_tokens_total"] == 650
    [down] = doc["down"]
    assert down["until_unix"] is None and down["down_s"] >= 1 and doc["server_down_s"] == down["down_s"]
    assert doc["error"].startswith("server down for")
    lines = err.splitlines()
    assert lines[-1].startswith("phasetop metrics: server down for") and "gave up after" in lines[-1]
    assert lines[0].startswith("metrics: server down since")  # the note as it went down; stdout holds only JSON
    assert "Traceback" not in err


def test_a_proxy_503_is_down_and_back_without_a_restart():
    base = fixture("vllm-0.33.txt")
    with MetricsServer([base]) as server:
        cli = metrics_cli("--url", server.url, "--count", "4", "--interval", "0.1", "--json")
        wait_until(lambda: server.metrics_requests >= 2)
        server.metrics_status = 503
        seen = server.metrics_requests
        wait_until(lambda: server.metrics_requests >= seen + 3)
        server.metrics_status = 200
        out, err = cli.communicate(timeout=60)
    assert cli.returncode == 0, err
    doc = json.loads(out)
    assert len(doc["snapshots"]) == 4
    [down] = doc["down"]
    assert down["failed_scrapes"] >= 3 and "HTTP 503" in down["reason"] and down["until_unix"] is not None
    assert all(s["restart"] is None for s in doc["snapshots"]), "same process: a gap, not a restart"


def test_metrics_turned_off_after_answering_is_not_down_and_keeps_what_was_measured():
    with MetricsServer([fixture("vllm-0.33.txt")]) as server:
        cli = metrics_cli("--url", server.url, "--count", "100", "--interval", "0.1", "--json")
        wait_until(lambda: server.metrics_requests >= 3)
        server.metrics_status = 404
        out, err = cli.communicate(timeout=60)
    assert cli.returncode == 1, err
    doc = json.loads(out)
    assert len(doc["snapshots"]) >= 1 and doc["down"] == []
    assert "exposes no Prometheus metrics" in doc["error"]
    assert err.count("\n") == 1 and "exposes no Prometheus metrics" in err


@pytest.mark.parametrize(("argv", "code"), [(["--count", "1000", "--json"], 130), (["--json", "--count", "1000", "--down-timeout", "50"], 130), ([], 0)])
def test_ctrl_c_prints_what_it_has(argv, code):
    base = fixture("llamacpp.txt")
    with MetricsServer([base, bump(base, {"llamacpp:tokens_predicted_total": 5})]) as server:
        cli = metrics_cli("--url", server.url, "--interval", "0.05", *argv)
        wait_until(lambda: server.metrics_requests >= 4)
        cli.send_signal(signal.SIGINT)
        out, err = cli.communicate(timeout=60)
    assert cli.returncode == code, err
    assert "Traceback" not in err
    if "--json" in argv:
        doc = json.loads(out)
        assert doc["interrupted"] is True and len(doc["snapshots"]) >= 2
        assert doc["snapshots"][-1]["generation_tokens_total"] == 645
        assert "interrupted after" in err
    else:
        assert out.count("llamacpp metrics") >= 2 and "stopped after" in err
