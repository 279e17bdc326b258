"""Driving the UI in a real terminal: a detached tmux session on the test's own socket, its pane read as text.

tmux is required (CI installs it): a missing tmux fails the tests that use it, they never skip."""

from __future__ import annotations

import os
import re
import subprocess
import time

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
