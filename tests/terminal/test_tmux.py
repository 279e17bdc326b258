"""The UI in a real terminal: `python -m tui` inside a detached tmux session, driven by keys.

tmux is required (CI installs it): a missing tmux fails this test, it never skips.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import time

from tui.sim.launcher import SimulatorProcess

WIDTH, HEIGHT = 120, 40
TTFT = re.compile(r"TTFT [\d,]+\.\d ms")


def tmux(socket, *args: str) -> str:
    """Run a tmux command on the test's own server; -f /dev/null: no user tmux.conf changes size or keys.

    The environment is passed explicitly: readline (loaded under pytest) exports COLUMNS=80 and
    LINES=24 into the C environ that a bare subprocess inherits, and Textual would believe them
    over the pane's real size.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    command = ["tmux", "-f", "/dev/null", "-S", str(socket), *args]
    return subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout


def wait_for(socket, condition, what: str, timeout_s: float) -> str:
    """Poll the pane until `condition(text)` holds; a deadline, never a fixed sleep."""
    deadline = time.monotonic() + timeout_s
    screen = ""
    while time.monotonic() < deadline:
        screen = tmux(socket, "capture-pane", "-p", "-t", "ui")
        if condition(screen):
            return screen
        time.sleep(0.2)
    raise AssertionError(f"no {what} within {timeout_s:.0f} s; the pane shows:\n{screen}")


def run_sized(socket, cwd, command: str) -> None:
    """Run `command` (sh) in a detached pane sized WIDTH×HEIGHT before it starts: never tmux's 80x24 default."""
    tmux(socket, "new-session", "-d", "-s", "ui", "-x", str(WIDTH), "-y", str(HEIGHT), "-c", str(cwd), "cat")
    tmux(socket, "set-option", "-g", "window-size", "manual", ";", "resize-window", "-t", "ui", "-x", str(WIDTH), "-y", str(HEIGHT))
    tmux(socket, "respawn-pane", "-k", "-t", "ui", "-c", str(cwd), "sh", "-c", command)


def exit_line(exit_file, timeout_s: float) -> str:
    """What the pane's `echo EXIT=$? > file` wrote once the command ended."""
    deadline = time.monotonic() + timeout_s
    while not exit_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert exit_file.exists(), f"the command did not exit within {timeout_s:.0f} s"
    return exit_file.read_text().strip()


def test_send_in_a_real_terminal_shows_ttft_and_q_exits_0(tmp_path):
    assert shutil.which("tmux"), "tmux is not installed (CI installs it: .ci/run)"
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
            assert "── short 200 ──" in screen, "s with an empty text area sends the short preset"
            tmux(socket, "send-keys", "-t", "ui", "q")
            assert exit_line(exit_file, 60) == "EXIT=0"
        finally:
            subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True)
