"""Serve one simulator with uvicorn on a socket we bind ourselves, so `--port 0` can report its port."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Sequence

import uvicorn
from starlette.types import ASGIApp

from tui.net import url_of
from tui.sim.options import SimOptions
from tui.sim.server import build_app


async def serve(
    options: SimOptions,
    sock: socket.socket,
    on_ready: Callable[[str], None],
    stop_on_stdin_close: bool = False,
) -> None:
    """Run until SIGINT/SIGTERM (or stdin closing, when asked); call `on_ready(url)` once listening."""
    await serve_apps([(build_app(options), sock)], lambda: on_ready(url_of(sock)), stop_on_stdin_close)


async def serve_apps(
    apps: Sequence[tuple[ASGIApp, socket.socket]],
    on_ready: Callable[[], None],
    stop_on_stdin_close: bool = False,
) -> None:
    """Serve each app on its socket in this loop until a signal (or stdin closing); `on_ready()` once all listen.

    A disaggregated simulator serves its front and every worker so: one server told to stop stops them all.
    """
    servers = [
        _SignalsTakenAbove(uvicorn.Config(
            app, http="httptools", log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=2,
        ))  # httptools (a C parser and framing) rather than h11 (pure Python): the token path is per-chunk Python
        for app, _ in apps
    ]
    with _stop_on_signals(servers):
        await _serve_all(servers, apps, on_ready, stop_on_stdin_close)


async def _serve_all(servers: Sequence[uvicorn.Server], apps: Sequence[tuple[ASGIApp, socket.socket]],
                     on_ready: Callable[[], None], stop_on_stdin_close: bool) -> None:
    tasks = [asyncio.create_task(server.serve(sockets=[sock])) for server, (_, sock) in zip(servers, apps, strict=True)]
    while not all(server.started for server in servers) and not any(task.done() for task in tasks):
        await asyncio.sleep(0.01)
    if all(server.started for server in servers):
        # Everything loaded so far lives as long as the process: keep it out of the collector's full
        # passes (25 ms each, measured). And collect the young generation every 20,000 allocations, not
        # 700: each streamed token allocates a few short-lived objects, and at 30k tokens/s the default
        # ran hundreds of collections a second (about 4 % of the core).
        gc.freeze()
        gc.set_threshold(20_000, *gc.get_threshold()[1:])
        on_ready()
        if stop_on_stdin_close:
            _watch_stdin(servers[0])
    while not all(task.done() for task in tasks):
        if any(server.should_exit for server in servers) or any(task.done() for task in tasks):
            for server in servers:
                server.should_exit = True
        await asyncio.wait(tasks, timeout=0.1)
    for task in tasks:
        task.result()


class _SignalsTakenAbove(uvicorn.Server):
    """A uvicorn server that leaves SIGINT and SIGTERM to `_stop_on_signals`: each server of its own would take them
    in turn, and the first to finish would raise the signal while the others were still shutting down (their
    lifespans cancelled, with a traceback)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.contextmanager
def _stop_on_signals(servers: Sequence[uvicorn.Server]) -> Iterator[None]:
    """SIGINT and SIGTERM ask every server to stop; once all have, the signal is raised again as uvicorn does (Ctrl-C
    a KeyboardInterrupt, SIGTERM the default end), so a caller sees how it was stopped."""
    caught: list[int] = []

    def stop(signum: int, frame: object) -> None:
        caught.append(signum)
        for server in servers:
            server.force_exit = server.should_exit and signum == signal.SIGINT  # a second Ctrl-C: no waiting
            server.should_exit = True

    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    for signum in caught[-1:]:
        signal.raise_signal(signum)


def _watch_stdin(server: uvicorn.Server) -> None:
    """Stop when the parent's end of our stdin closes, so a crashed parent leaves no orphan server."""

    def wait_for_eof() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        server.should_exit = True

    threading.Thread(target=wait_for_eof, name="sim-stdin-watch", daemon=True).start()
