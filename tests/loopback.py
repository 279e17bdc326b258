"""Loopback addresses for tests."""

from __future__ import annotations

import socket
import time


def free_port() -> int:
    """A loopback port nothing listens on (just bound and released): a server the test starts can take it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def closed_port_url() -> str:
    """http://127.0.0.1:PORT where nothing listens."""
    return f"http://127.0.0.1:{free_port()}"


def wait_listening(port: int, timeout_s: float = 30.0) -> None:
    """Until something accepts connections on the loopback `port` (a program the test started)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listened on {port} after {timeout_s:.0f} s")
