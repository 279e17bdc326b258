"""The CLI in a real terminal against a server whose model id, version and errors are laden with escape
sequences: the pane's title, the clipboard (OSC 52) and the screen stay as they were.

A control test prints the same escapes raw in the same kind of pane and sees each of them act, so a
passing run means phasetop's output was neutralised, not that tmux ignored it. tmux is required (CI
installs it); a missing tmux fails this test, it never skips.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys

import pytest

from tests.hostile import ESCAPES, escape_laden, serving
from tests.terminal.tmux_pane import HEIGHT, WIDTH, exit_line, tmux

TITLE = "phasetop-test-title"
MARKER = "MARKER-BEFORE-THE-COMMAND"


def run_in_pane(tmp_path, command: str) -> dict[str, str]:
    """Run `command` in a fresh tmux pane titled TITLE after printing MARKER; what the terminal then shows."""
    assert shutil.which("tmux"), "tmux is not installed (make test installs it: scripts/test_tools.sh)"
    socket, exit_file = tmp_path / "tmux.sock", tmp_path / "exit"
    script = f"echo {MARKER}; {command}; echo EXIT=$? > {shlex.quote(str(exit_file))}; sleep 30"
    tmux(socket, "new-session", "-d", "-s", "ui", "-x", str(WIDTH), "-y", str(HEIGHT), "-c", str(tmp_path), "cat")
    try:
        tmux(socket, "set-option", "-g", "set-clipboard", "on")
        tmux(socket, "select-pane", "-t", "ui", "-T", TITLE)
        tmux(socket, "respawn-pane", "-k", "-t", "ui", "-c", str(tmp_path), "sh", "-c", script)
        code = exit_line(exit_file, 120)
        return {
            "exit": code,
            "title": tmux(socket, "display", "-p", "-t", "ui", "#{pane_title}").strip(),
            "buffers": tmux(socket, "list-buffers"),
            "screen": tmux(socket, "capture-pane", "-p", "-J", "-t", "ui"),
        }
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True)


def test_the_escapes_act_when_printed_raw(tmp_path):
    """The control: in this pane, the very bytes the server sends do retitle it, clear it and write a buffer."""
    seen = run_in_pane(tmp_path, f"printf %s {shlex.quote(ESCAPES)}")
    assert seen["title"] == "pwned-title"
    assert seen["buffers"], "OSC 52 wrote a paste buffer"
    assert MARKER not in seen["screen"], "the screen was cleared"


@pytest.mark.parametrize("command", [
    "probe --prompt-tokens 20 --max-tokens 4",
    "bench --num-prompts 2 --prompt-tokens 20 --max-tokens 4",
    "ceiling",
])
@pytest.mark.parametrize("failing", [False, True], ids=["answers", "errors"])
def test_a_command_leaves_title_clipboard_and_screen_alone(tmp_path, command, failing):
    with serving(escape_laden(failing=failing)) as server:
        seen = run_in_pane(tmp_path, f"{shlex.quote(sys.executable)} -m tui {command} --url {server.url} --no-save"
                           if command != "ceiling" else f"{shlex.quote(sys.executable)} -m tui {command} --url {server.url}")
    assert seen["exit"] == ("EXIT=1" if failing and command != "ceiling" else "EXIT=0"), seen["screen"]
    assert seen["title"] == TITLE
    assert seen["buffers"] == ""
    assert MARKER in seen["screen"], "the screen was not cleared"
    assert "evil\\x1b]0;pwned-title" in seen["screen"] or "engine died\\x1b]0;pwned-title" in seen["screen"]
