"""ListenerFinder: the server process behind a port, kept while it runs, found again after a restart."""

from __future__ import annotations

import socket
import subprocess
import sys

from tui.sources.host import ListenerFinder

LISTEN_ON = (
    "import socket, sys\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()\n"
    "print(s.getsockname()[1], flush=True)\n"
    "sys.stdin.read()\n"
)


def listen(port: int = 0) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-c", LISTEN_ON, str(port)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    return proc, int(proc.stdout.readline())


def stop(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    proc.wait(timeout=10)


def test_a_restarted_server_on_the_same_port_is_found_again():
    first, port = listen()
    finder = ListenerFinder(port)
    try:
        assert finder.find()[0].pid == first.pid
    finally:
        stop(first)
    second, _ = listen(port)
    try:
        process, reason = finder.find()  # the first one exited: scanned again at once
        assert reason is None and process.pid == second.pid
    finally:
        stop(second)


def test_nothing_listening_is_rescanned_only_after_the_interval():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    slow, eager = ListenerFinder(port, rescan_s=600), ListenerFinder(port, rescan_s=0)
    for finder in (slow, eager):
        assert finder.find() == (None, f"nothing listens on port {port} here")
    server, _ = listen(port)
    try:
        assert slow.find()[0] is None  # within rescan_s: the last answer stands
        assert eager.find()[0].pid == server.pid
    finally:
        stop(server)
