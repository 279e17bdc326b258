"""Listening sockets phasetop binds itself (a simulator, the OTLP receiver), so a port of 0 can report the one it got."""

from __future__ import annotations

import socket


def bind(host: str, port: int) -> socket.socket:
    """A listening socket; raises OSError with the system's reason (port in use, bad address)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP, and
    # without it Nagle holds each small SSE chunk until the client's delayed ACK (~40 ms bursts).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
