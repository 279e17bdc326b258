"""Loopback addresses for tests."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback port nothing listens on (just bound and released): a server the test starts can take it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def closed_port_url() -> str:
    """http://127.0.0.1:PORT where nothing listens."""
    return f"http://127.0.0.1:{free_port()}"
