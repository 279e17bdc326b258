"""ListenerFinder: the server process behind a port, kept while it runs, found again after a restart."""

from __future__ import annotations

import socket
import subprocess

from tests.sources.listener_child import listen
from tui.sources.host import ListenerFinder


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
