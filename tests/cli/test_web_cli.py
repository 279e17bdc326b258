"""`phasetop web`'s checks before anything starts, and the command each tab's UI runs (no secret on it)."""

from __future__ import annotations

import shlex
import socket
import subprocess
import sys

import pytest

from tests.cli.running import run
from tests.loopback import free_port
from tui.web.server import WebServer

pytestmark = pytest.mark.usefixtures("isolated")


@pytest.fixture
def served(monkeypatch):
    """WebServer.serve as far as its start-up line: the servers it was handed, nothing listening."""
    servers: list[WebServer] = []

    def serve(self, debug=False):
        servers.append(self)
        self._on_ready()

    monkeypatch.setattr(WebServer, "serve", serve)
    return servers


@pytest.mark.parametrize(("port", "reason"), [
    ("abc", "'abc' is not a port (1–65535)"),
    ("0", "port 0 is out of range 1–65535"),
    ("70000", "port 70000 is out of range 1–65535"),
    ("-1", "port -1 is out of range 1–65535"),
])
def test_a_bad_port_is_one_line_and_exit_2(capsys, served, port, reason):
    code, out, err = run(capsys, "web", f"--port={port}")
    assert code == 2 and out == "" and served == []
    assert err.splitlines() == [f"phasetop web: argument --port: {reason}; phasetop web --help lists the options"]


def test_a_port_in_use_is_one_line_and_exit_1_before_anything_starts(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        # A subprocess with a deadline: a check that let it serve would hang here, not pass.
        done = subprocess.run([sys.executable, "-m", "tui", "web", "--port", str(port)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [f"phasetop web: port {port} on 127.0.0.1 is in use (another server?); pick another with --port"]


def test_a_bad_setting_is_one_line_before_anything_starts(capsys, served):
    code, out, err = run(capsys, "web", "--port", str(free_port()), "--theme", "projector")
    assert code == 2 and served == []
    assert err.startswith("phasetop web: bad settings: --theme: Input should be 'phasetop-projector'") and err.count("\n") == 1


def test_each_tab_runs_the_ui_with_the_options_given_and_the_key_stays_in_the_environment(capsys, served, monkeypatch, tmp_path):
    monkeypatch.setenv("PHASETOP_API_KEY", "sk-cli-secret-91")
    config = tmp_path / "mine.toml"
    config.write_text('timeout_s = 20.0\n')
    port = free_port()
    code, out, err = run(capsys, "--config", "mine.toml", "web", "--port", str(port), "--url", "http://127.0.0.1:9",
                         "--no-save", "--window", "10", "--allow-eos", "--theme", "phasetop-projector",
                         "--serve", "vllm serve m --port 9")
    assert code == 0
    assert out == f"http://127.0.0.1:{port}\n"
    assert err.splitlines() == [f"phasetop web: open http://127.0.0.1:{port} (each tab runs its own phasetop; Ctrl-C stops)"]
    [server] = served
    assert (server.host, server.port, server.title) == ("127.0.0.1", port, "phasetop")
    assert server.command == "exec " + shlex.join([
        sys.executable, "-m", "tui", "--config", str(config.resolve()), "--url", "http://127.0.0.1:9", "--allow-eos",
        "--window", "10.0", "--no-save", "--serve", "vllm serve m --port 9", "--theme", "phasetop-projector"])
    assert "sk-cli-secret-91" not in server.command


def test_with_no_url_each_tab_gets_its_own_simulator(capsys, served):
    port = free_port()
    code, out, err = run(capsys, "web", "--port", str(port), "--font-size", "24")
    assert code == 0
    assert out == f"http://127.0.0.1:{port}/?fontsize=24\n"
    assert "each tab runs its own phasetop, on its own simulator when nothing answers at http://127.0.0.1:8000;" in err
    assert served[0].command == "exec " + shlex.join([sys.executable, "-m", "tui"])
    assert served[0].font_size == 24


def test_another_host_is_said_explicitly_and_warned_about(capsys, served):
    port = free_port()
    code, out, err = run(capsys, "web", "--host", "0.0.0.0", "--port", str(port))
    assert code == 0
    assert out == f"http://{socket.gethostname()}:{port}\n"
    warning = err.splitlines()[0]
    assert warning.startswith("phasetop web: warning: listening on 0.0.0.0: the page has no login")
    assert f"ssh -L {port}:127.0.0.1:{port} HOST" in warning


@pytest.mark.parametrize("size", ["5", "97", "big"])
def test_a_bad_font_size_is_one_line(capsys, served, size):
    code, out, err = run(capsys, "web", "--font-size", size)
    assert code == 2 and served == [] and err.count("\n") == 1 and "argument --font-size" in err
