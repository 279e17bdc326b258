"""Loopback addresses for tests."""

from __future__ import annotations

import socket


def closed_port_url() -> str:
    """http://127.0.0.1:PORT where nothing listens (a port just bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"
