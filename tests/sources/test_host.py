"""Host CPU/RAM and a local server process found by its listening port (real processes, real sockets)."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from tui.sources.host import HostSampler, local_port

BUSY_SERVER = (
    "import socket, subprocess, sys\n"
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
    # a child that holds 64 MiB and spins a core, like a model runner under `ollama serve`
    "code = 'b = b\"x\" * (64 << 20)\\nprint(flush=True)\\nwhile True: pass'\n"
    "child = subprocess.Popen([sys.executable, '-c', code], stdout=subprocess.PIPE)\n"
    "child.stdout.readline()\n"
    "print(s.getsockname()[1], child.pid, flush=True)\n"
    "sys.stdin.read(); child.kill()\n"
)


@pytest.mark.parametrize(
    ("url", "port"),
    [
        ("http://127.0.0.1:8000", 8000),
        ("http://localhost:11434/", 11434),
        ("http://[::1]:9000", 9000),
        ("http://0.0.0.0:30000", 30000),
        ("127.0.0.1:8080", 8080),
        ("http://localhost", 80),
        ("http://10.1.2.3:8000", None),
        ("http://gpu-box.example:8000", None),
        (None, None),
    ],
)
def test_local_port(url, port):
    assert local_port(url) == port


def test_host_figures_without_a_server():
    sample = HostSampler(port=None).sample()
    memory = psutil.virtual_memory()
    assert sample.ram_total_bytes == memory.total
    assert 0 < sample.ram_used_bytes < sample.ram_total_bytes
    assert 0.0 <= sample.cpu_percent <= 100.0
    assert sample.process is None and sample.process_reason == "no local server port given"


def test_nothing_listening_says_so():
    with socket_port() as port:
        pass
    sample = HostSampler(port=port).sample()
    assert sample.process is None
    assert sample.process_reason == f"nothing listens on port {port} here"


@pytest.mark.timing  # a CPU share over real time: on a loaded box the spinning child got 19 % of a core
def test_server_process_cpu_and_rss_include_its_children():
    proc = subprocess.Popen([sys.executable, "-c", BUSY_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port, child_pid = map(int, proc.stdout.readline().split())
        sampler = HostSampler(port=port)
        child_rss = psutil.Process(child_pid).memory_info().rss
        time.sleep(0.5)
        sample = sampler.sample()
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
    assert sample.process is not None
    assert sample.process.pid == proc.pid
    assert sample.process.rss_bytes >= child_rss >= 64 << 20
    assert sample.process.cpu_percent > 20  # the child spins a core (wide margin: 2 shared cores)
    assert sample.process.num_threads >= 2


class socket_port:
    """A free loopback port, closed on exit."""

    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return self.sock.getsockname()[1]

    def __exit__(self, *exc) -> None:
        self.sock.close()
