"""The UI on the real engine in a real terminal, as `make demo-real` opens it: send, see the figures, quit.

`phasetop serve-llamacpp --ui` starts llama-server, opens the UI on it under tmux, and stops the
server when the UI quits.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys

import psutil
import pytest

from tests.real.conftest import model_path
from tests.terminal.tmux_pane import TTFT, exit_line, run_sized, tmux, wait_for

pytestmark = pytest.mark.real_engine

SERVER_PROCESS = re.compile(r"server process llama-server \(pid (\d+)\): CPU \d+%")
SHARE_OF_CEILING = re.compile(r"= \d+%[\s│]+of[\s│]+the[\s│]+365[\s│]+tok/s[\s│]+ceiling")
"""The CPU row's 90 GB/s (preset) over the served model's real size, 246,587,904 bytes (/v1/models meta.size);
the figures line may wrap inside the timeline pane, its border between the words."""


def test_send_on_llama_server_shows_the_figures_and_q_stops_ui_and_server(tmp_path):
    assert shutil.which("tmux"), "tmux is not installed (make test installs it: scripts/test_tools.sh)"
    socket, exit_file = tmp_path / "tmux.sock", tmp_path / "exit"
    command = (f"XDG_CONFIG_HOME={shlex.quote(str(tmp_path))} {shlex.quote(sys.executable)} -m tui serve-llamacpp "
               f"--model {shlex.quote(str(model_path()))} --ui; echo EXIT=$? > {shlex.quote(str(exit_file))}")
    try:
        run_sized(socket, tmp_path, command)
        header = wait_for(socket, lambda s: "· up" in s and "llamacpp" in s, "header saying llamacpp is up", 120)
        assert not TTFT.search(header), "a TTFT figure before anything was sent"
        screen = wait_for(socket, lambda s: SERVER_PROCESS.search(s), "the server process in the host pane", 60)
        pid = int(SERVER_PROCESS.search(screen).group(1))
        tmux(socket, "send-keys", "-t", "ui", "s")
        wait_for(socket, lambda s: TTFT.search(s) and SHARE_OF_CEILING.search(s),
                 "TTFT, and decode as a share of the CPU ceiling, after pressing s", 120)
        tmux(socket, "send-keys", "-t", "ui", "q")
        assert exit_line(exit_file, 60) == "EXIT=0"
        assert not psutil.pid_exists(pid), "quitting the UI stops the server"
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True)
