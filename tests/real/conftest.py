"""The real engine: llama.cpp's llama-server on the CPU with Gemma 3 270M (`make real-engine` installs both).

One server per test module (module-scoped fixture), started with phasetop's own launcher: 4 slots
sharing an 8,192-token KV cache, one thread (with two, any other busy process on a 2-core machine
collapses decode), so timings stay comparable while other jobs run. Missing pieces fail, never skip.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tui.cli.main import main
from tui.sources.servers.llamacpp_server import LlamaServerProcess

REPO = Path(__file__).resolve().parents[2]
CLIENT_TIMEOUT_S = "120"
"""Generous: a 1,000-token prefill takes ~5 s on one idle core, several times that on a busy machine."""


def model_path() -> Path:
    """The GGUF file `make real-engine` assembled (PHASETOP_REAL_MODEL, else the script's cache path)."""
    path = os.environ.get("PHASETOP_REAL_MODEL") or subprocess.run(
        [str(REPO / "scripts" / "real_engine.sh"), "model-path"], check=True, capture_output=True, text=True
    ).stdout.strip()
    if not Path(path).is_file():
        pytest.fail(f"no model file at {path}: run `make real-engine`")
    return Path(path)


def start_server(**options) -> LlamaServerProcess:
    return LlamaServerProcess.start(model_path(), **options)


@pytest.fixture(scope="module")
def llama():
    with start_server() as server:
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


def probe(capsys, url: str, *args: str) -> dict:
    """`phasetop probe --json` that must succeed."""
    code, document, err = phasetop_json(capsys, "probe", "--url", url, "--timeout", CLIENT_TIMEOUT_S, *args)
    assert code == 0, err
    assert all(r["ok"] for r in document["requests"]), document["requests"]
    return document
