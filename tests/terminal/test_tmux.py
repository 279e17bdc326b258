"""The UI in a real terminal: `python -m tui` inside a detached tmux session, driven by keys.

tmux is required (CI installs it): a missing tmux fails this test, it never skips.
"""

import shlex
import shutil
import subprocess
import sys

from tests.terminal.tmux_pane import HEIGHT, TTFT, WIDTH, exit_line, tmux, wait_for
from tui.sources.servers.simulator_server import SimulatorProcess


def test_send_in_a_real_terminal_shows_ttft_and_q_exits_0(tmp_path):
    assert shutil.which("tmux"), "tmux is not installed (make test installs it: scripts/test_tools.sh)"
    socket, exit_file = tmp_path / "tmux.sock", tmp_path / "exit"
    runs = tmp_path / "runs"
    runs.mkdir()
    dead_temp = runs / ".run.99999999.x1y2.tmp"  # what a save killed mid-write leaves (pid 99999999 never runs)
    dead_temp.write_text("{")
    with SimulatorProcess.start([]) as sim:
        # cwd and config dir in tmp_path: no .env or user config file changes what the UI does.
        command = (f"XDG_CONFIG_HOME={shlex.quote(str(tmp_path))} PHASETOP_RUNS_DIR={shlex.quote(str(runs))} "
                   f"{shlex.quote(sys.executable)} -m tui --url {sim.url}; "
                   f"echo EXIT=$? > {shlex.quote(str(exit_file))}")
        tmux(socket, "new-session", "-d", "-s", "ui", "-x", str(WIDTH), "-y", str(HEIGHT), "-c", str(tmp_path),
             "sh", "-c", command)
        try:
            assert tmux(socket, "display", "-p", "-t", "ui", "#{pane_width}x#{pane_height}").strip() == f"{WIDTH}x{HEIGHT}"
            header = wait_for(socket, lambda s: f"{sim.url} · up" in s, "header saying the server is up", 90)
            assert header.splitlines()[0].strip().startswith(f"openai {sim.url} · up")
            assert not TTFT.search(header), "a TTFT figure before anything was sent"
            assert not dead_temp.exists(), "a dead save's temp file is removed as the UI starts"
            tmux(socket, "send-keys", "-t", "ui", "s")
            screen = wait_for(socket, lambda s: TTFT.search(s), "TTFT figure after pressing s", 90)
            # (The lane's figures, not the answer's heading: a long answer scrolls that out of its pane.)
            assert "short 200: TTFT" in screen, "s with an empty text area sends the short preset"
            tmux(socket, "send-keys", "-t", "ui", "q")
            assert exit_line(exit_file, 60) == "EXIT=0"
        finally:
            subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True)
