"""probe, bench and metrics against servers that drip or flood: every answer within --timeout (one clear
line when it is not), every body under its cap. The old client's per-read timeout never tripped on a byte a
second (each command ran for minutes), and it inflated a gzip bomb whole (1.6–2.1 GB)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests import hostile

TIMEOUT = "2"
"""Short enough that a byte a second (200 of them) never completes; long enough that a loaded box's slow 404
to the API detection's first question (/api/version) is not taken for the drip (0.5 s was, once in a full run)."""
BOUND_S = 30
"""A command still running this long is hung (with --timeout 2 each takes a few seconds at most)."""

COMMANDS = {
    "probe": ["probe", "--prompt-tokens", "20", "--max-tokens", "4", "--repeat", "1"],
    "bench": ["bench", "--num-prompts", "2", "--prompt-tokens", "20", "--max-tokens", "4"],
    "metrics": ["metrics", "--once"],
}


def phasetop(tmp_path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHASETOP_")}
    env |= {"XDG_CONFIG_HOME": str(tmp_path), "PHASETOP_RUNS_DIR": str(tmp_path / "runs")}
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "tui", *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=BOUND_S)
    return result, time.monotonic() - started


@pytest.mark.parametrize("command", ["probe", "bench"])
def test_a_dripping_model_list_is_one_line_within_the_timeout(tmp_path, command):
    with hostile.serving(hostile.dripping("/v1/models")) as server:
        result, _ = phasetop(tmp_path, *COMMANDS[command], "--url", server.url, "--timeout", TIMEOUT)
    assert result.returncode == 1, result.stderr
    assert result.stderr == f"phasetop {command}: {server.url}/v1/models: no complete answer within {TIMEOUT} s\n"


def test_dripping_metrics_fail_the_metrics_command_with_one_line(tmp_path):
    with hostile.serving(hostile.dripping("/metrics")) as server:
        result, _ = phasetop(tmp_path, *COMMANDS["metrics"], "--url", server.url, "--timeout", TIMEOUT)
    assert result.returncode == 1, result.stderr
    assert result.stderr == f"phasetop metrics: {server.url}/metrics: no complete answer within {TIMEOUT} s\n"


@pytest.mark.parametrize("command", ["probe", "bench"])
def test_dripping_metrics_do_not_hold_up_a_measurement(tmp_path, command):
    """/metrics is optional to them: each read gives up at the deadline and the requests are measured."""
    with hostile.serving(hostile.dripping("/metrics")) as server:
        result, took_s = phasetop(tmp_path, *COMMANDS[command], "--url", server.url, "--timeout", TIMEOUT)
    assert result.returncode == 0, result.stderr
    assert "saved run" in result.stderr
    print(f"{command} against a dripping /metrics: {took_s:.1f} s")


def test_a_gzip_bomb_on_metrics_is_one_line(tmp_path):
    with hostile.serving(hostile.gzip_bomb("/metrics", inflated_mb=64)) as server:
        result, _ = phasetop(tmp_path, *COMMANDS["metrics"], "--url", server.url)
    assert result.returncode == 1, result.stderr
    assert result.stderr == f"phasetop metrics: {server.url}/metrics: answer larger than 16 MB: stopped reading\n"


def test_a_gzip_bomb_on_the_model_list_is_one_line(tmp_path):
    with hostile.serving(hostile.gzip_bomb("/v1/models", inflated_mb=64)) as server:
        result, _ = phasetop(tmp_path, *COMMANDS["probe"], "--url", server.url)
    assert result.returncode == 1, result.stderr
    assert result.stderr == f"phasetop probe: {server.url}/v1/models: answer larger than 1 MB: stopped reading\n"
