"""`phasetop --serve CMD` in a real terminal: the command starts in its own process group, the UI opens on it
once /health answers, and `q` stops the whole group; a command that fails to start shows its own last lines
and exit status, not a UI saying DOWN."""

import shlex
import subprocess
import sys

from tests.loopback import closed_port_url
from tests.terminal.tmux_pane import HEIGHT, WIDTH, exit_line, tmux, wait_for
from tui.sources.servers.served_command import listening


def start_pane(socket, tmp_path, serve: str, exit_file) -> None:
    command = (f"XDG_CONFIG_HOME={shlex.quote(str(tmp_path))} PHASETOP_RUNS_DIR={shlex.quote(str(tmp_path / 'runs'))} "
               f"{shlex.quote(sys.executable)} -m tui --serve {shlex.quote(serve)}; echo EXIT=$? > {shlex.quote(str(exit_file))}; "
               "sleep 30")
    tmux(socket, "new-session", "-d", "-s", "ui", "-x", str(WIDTH), "-y", str(HEIGHT), "-c", str(tmp_path), "sh", "-c", command)


def test_serve_opens_the_ui_on_the_command_and_q_stops_its_group(tmp_path):
    socket, exit_file = tmp_path / "tmux.sock", tmp_path / "exit"
    port = int(closed_port_url().rsplit(":", 1)[1])
    url = f"http://127.0.0.1:{port}"
    start_pane(socket, tmp_path, shlex.join([sys.executable, "-m", "tui", "sim", "--port", str(port),
                                             "--max-num-batched-tokens", "512"]), exit_file)
    try:
        # Up, with the served command's own flags in the header's config.
        wait_for(socket, lambda s: f"{url} · up" in s and "max_num_batched_tokens=512" in s, "the UI up on the served command", 90)
        tmux(socket, "send-keys", "-t", "ui", "q")
        assert exit_line(exit_file, 60) == "EXIT=0"
        assert not listening("127.0.0.1", port), "the served command was stopped with the UI"
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True)


def test_a_command_that_fails_to_start_shows_its_last_lines_and_status(tmp_path):
    socket, exit_file = tmp_path / "tmux.sock", tmp_path / "exit"
    failing = shlex.join([sys.executable, "-c", "import sys; print('loading'); print('ValueError: no such model'); sys.exit(3)",
                          "--port", str(int(closed_port_url().rsplit(":", 1)[1]))])
    start_pane(socket, tmp_path, failing, exit_file)
    try:
        assert exit_line(exit_file, 60) == "EXIT=1"
        screen = tmux(socket, "capture-pane", "-p", "-t", "ui")
        assert "exited while starting (status 3): ValueError: no such model" in screen
        assert "| loading" in screen and "DOWN" not in screen
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True)
