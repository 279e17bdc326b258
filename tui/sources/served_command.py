"""A server command a person gave phasetop to run (`phasetop --serve`, `phasetop tune`): started in its own
process group on the port its arguments name, waited on until /health answers, stopped as a group."""

from __future__ import annotations

import socket
from collections.abc import Callable
from urllib.parse import urlsplit

from tui.core.serve_command import ServeCommand
from tui.sources.managed_server import ManagedServer, ServerStartError

class CommandServer(ManagedServer):
    """The server command a person gave, as phasetop starts and stops it."""

    name = "the server"


def start_served(command: ServeCommand, timeout_s: float, url: str | None = None,
                 on_wait: Callable[[float, str], None] | None = None) -> CommandServer:
    """Start `command` and return once it is healthy at `url` (default: where its arguments say it listens).
    Raises ServerStartError: something else already answers there (its /health would pass for ours), the
    command cannot run, it exits while starting (with its last line; `log_tail` has more), or it is not
    healthy in `timeout_s`."""
    url = url or command.url
    host, port = urlsplit(url).hostname or "127.0.0.1", urlsplit(url).port or 80
    if listening(host, port):
        raise ServerStartError(f"something already listens on {url}: stop it, or give the command another --port")
    return CommandServer.launch(command.argv, url, timeout_s, on_wait=on_wait)


def listening(host: str, port: int) -> bool:
    """Something accepts connections at host:port now."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False
