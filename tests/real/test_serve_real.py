"""`phasetop serve-llamacpp`: one command from a GGUF file to a measured server, and a clean stop."""

from __future__ import annotations

import signal
import subprocess
import sys

import httpx
import pytest

from tests.real.conftest import model_path
from tui.cli.serve_llamacpp import READY_PREFIX

pytestmark = pytest.mark.real_engine


def test_serves_with_metrics_on_loopback_and_stops_on_sigterm(tmp_path):
    command = [sys.executable, "-m", "tui", "serve-llamacpp", "--model", str(model_path()), "--parallel", "2"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path) as serve:
        try:
            ready = serve.stdout.readline()
            assert ready.startswith(READY_PREFIX), (ready, serve.stderr.read() if serve.poll() is not None else "")
            url = ready.removeprefix(READY_PREFIX).strip()
            assert url.startswith("http://127.0.0.1:")
            assert httpx.get(f"{url}/health", timeout=10).json() == {"status": "ok"}
            metrics = httpx.get(f"{url}/metrics", timeout=10)
            assert metrics.status_code == 200 and "llamacpp:requests_processing" in metrics.text
            assert httpx.get(f"{url}/props", timeout=10).json()["total_slots"] == 2
            serve.send_signal(signal.SIGTERM)
            assert serve.wait(30) == 0
        finally:
            if serve.poll() is None:
                serve.kill()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/health", timeout=5)
