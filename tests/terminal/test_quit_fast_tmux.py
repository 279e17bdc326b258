"""q quits the real UI at once with an answer in flight: against a slow honest server (`sim --time-scale 50`,
a 30 s answer) and a dripping one (/metrics a byte a second, the stream a line a second). The process must
be gone within a second or so; the bound here leaves a loaded CI box room, the old UI took 28–30 s and more.

tmux is required (CI installs it): a missing tmux fails these tests, they never skip.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

from tests import hostile
from tests.terminal.tmux_pane import HEIGHT, WIDTH, tmux, wait_for
from tui.sources.servers.simulator_server import SimulatorProcess

pytestmark = pytest.mark.timing

LANE = re.compile(r"short 200 [^\n]*[▶━▁▂▃▄▅▆▇█]")
"""The short preset's lane: its label (its TTFT and the selection mark may sit beside it), then its marks."""

QUIT_BOUND_S = 5.0
"""Seconds from q to the process's exit that fail the test (measured: 0.6–0.8 s on a busy 2-core box)."""


@contextmanager
def _ui(tmp_path, url: str):
    """The UI in a detached 120x40 tmux pane; yields (socket, the file its exit status lands in)."""
    assert shutil.which("tmux"), "tmux is not installed (make test installs it: scripts/test_tools.sh)"
    socket, exit_file = tmp_path / "tmux.sock", tmp_path / "exit"
    command = (f"XDG_CONFIG_HOME={shlex.quote(str(tmp_path))} {shlex.quote(sys.executable)} -m tui --url {url}; "
               f"echo EXIT=$? > {shlex.quote(str(exit_file))}")
    tmux(socket, "new-session", "-d", "-s", "ui", "-x", str(WIDTH), "-y", str(HEIGHT), "-c", str(tmp_path), "sh", "-c", command)
    try:
        wait_for(socket, lambda s: f"{url} · up" in s, "header saying the server is up", 90)
        yield socket, exit_file
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True)


def _quit_s(socket, exit_file) -> float:
    """Press q; the seconds until the process exited (the pane's shell wrote its status), EXIT=0 checked."""
    pressed = time.monotonic()
    tmux(socket, "send-keys", "-t", "ui", "q")
    while not exit_file.exists() and time.monotonic() - pressed < 60:
        time.sleep(0.02)
    took = time.monotonic() - pressed
    assert exit_file.exists(), "the UI had not exited 60 s after q"
    assert exit_file.read_text().strip() == "EXIT=0"
    return took


def test_q_quits_at_once_against_a_slow_simulator(tmp_path):
    with SimulatorProcess.start(["--time-scale", "50"]) as sim, _ui(tmp_path, sim.url) as (socket, exit_file):
        tmux(socket, "send-keys", "-t", "ui", "1")
        # Decoding (its first ITL figures shown): a 128-token answer at this pace takes about 30 s more.
        wait_for(socket, lambda s: "ITL p50" in s and LANE.search(s), "the answer streaming", 60)
        took = _quit_s(socket, exit_file)
    assert took < QUIT_BOUND_S, f"q took {took:.1f} s with an answer in flight"


def test_q_quits_at_once_against_a_dripping_server(tmp_path):
    script = hostile.dripping("/metrics")
    chunk = b'data: {"choices": [{"index": 0, "text": "x", "finish_reason": null}]}\n\n'
    script.stream, script.stream_gap_s = [chunk] * 100, 1.0
    with hostile.serving(script) as server, _ui(tmp_path, server.url) as (socket, exit_file):
        tmux(socket, "send-keys", "-t", "ui", "1")
        deadline = time.monotonic() + 60
        while not (server.log and server.log[0].body) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.log, "the request never reached the server"
        wait_for(socket, lambda s: LANE.search(s), "the answer's lane", 30)
        took = _quit_s(socket, exit_file)
    assert took < QUIT_BOUND_S, f"q took {took:.1f} s with a dripping answer in flight"
