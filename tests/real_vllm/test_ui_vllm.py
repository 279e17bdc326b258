"""The UI on real vLLM in a real terminal, as `make demo-vllm` opens it: send, see the figures, quit.

`phasetop serve-vllm --ui` starts vLLM (three processes in their own group), opens the UI on it under
tmux, and stops the whole group when the UI quits.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys

import psutil
import pytest

from tests.terminal.tmux_pane import TTFT, exit_line, run_sized, tmux, wait_for

pytestmark = pytest.mark.real_vllm


def test_send_on_real_vllm_shows_the_figures_and_q_stops_the_ui_and_every_vllm_process(tmp_path):
    assert shutil.which("tmux"), "tmux is not installed (make test installs it: scripts/test_tools.sh)"
    socket, exit_file = tmp_path / "tmux.sock", tmp_path / "exit"
    engine: list[psutil.Process] = []
    command = (f"XDG_CONFIG_HOME={shlex.quote(str(tmp_path))} PHASETOP_RUNS_DIR={shlex.quote(str(tmp_path / 'runs'))} "
               f"{shlex.quote(sys.executable)} -m tui serve-vllm --renice --ui -- --enable-per-request-metrics; "
               f"echo EXIT=$? > {shlex.quote(str(exit_file))}")
    try:
        run_sized(socket, tmp_path, command)
        header = wait_for(socket, lambda s: "· up" in s and "openai" in s and "tiny" in s, "header saying vLLM is up", 240)
        assert not TTFT.search(header), "a TTFT figure before anything was sent"
        engine = _vllm_processes()
        assert len(engine) >= 3, "the API server, EngineCore and its Worker"
        tmux(socket, "send-keys", "-t", "ui", "s")
        screen = wait_for(socket, lambda s: TTFT.search(s) and "tok/s" in s, "TTFT and a decode rate after pressing s", 120)
        assert "enable_prefix_caching=True" in screen  # vLLM's own cache_config_info, in the header
        tmux(socket, "send-keys", "-t", "ui", "q")
        assert exit_line(exit_file, 90) == "EXIT=0"
        assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in engine), \
            "quitting the UI stops every vLLM process"
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True)
        for process in engine:
            if process.is_running():
                process.kill()


def _vllm_processes() -> list[psutil.Process]:
    """vLLM's API server started by phasetop serve-vllm, and its engine and worker."""
    found = []
    for process in psutil.process_iter(["cmdline", "name"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if "vllm.entrypoints.openai.api_server" in cmdline or (process.info["name"] or "").startswith("VLLM::"):
            found.append(process)
    return found
