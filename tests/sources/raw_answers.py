"""Servers on loopback that answer with bytes that are not HTTP (a bad status line, garbage where a chunk size
goes), for the failures those make. Not a test module: tests/sources and tests/cli import it.

`RawGeneration` is the scripted server (testbeds/scripted_server.py), so detection and /tokenize answer well,
with every generation request answered by exactly the bytes given; `raw_server` answers every request,
whatever its path, with the same bytes (nothing is detected).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from testbeds.scripted_server import GENERATION_PATHS, Script, ScriptedServer

BAD_STATUS_LINE = b"HTTP/1.1 abc OK\r\nContent-Length: 0\r\n\r\n"
"""A status line whose code is not a number: aiohttp's parser words it in five lines, with a caret."""

SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
_TOKEN = b'data: {"choices": [{"text": "Hello", "index": 0}]}\n\n'
ONE_TOKEN = b"%x\r\n%b\r\n" % (len(_TOKEN), _TOKEN)
"""One well-framed chunk of a completion stream."""
GARBAGE_CHUNK = b"zz\r\ngarbage\r\n"
"""Where a chunk size goes, letters: the stream is no longer HTTP."""


class RawGeneration(ScriptedServer):
    """Answers each generation request with `parts`, written `gap_s` apart, then closes the connection."""

    def __init__(self, parts: list[bytes], gap_s: float = 0.1, script: Script | None = None) -> None:
        super().__init__(script)
        self.parts, self.gap_s = parts, gap_s

    async def _respond(self, method, path, headers, body, received_ns, writer) -> bool:
        if path not in GENERATION_PATHS:
            return await super()._respond(method, path, headers, body, received_ns, writer)
        for index, part in enumerate(self.parts):
            if index:
                await asyncio.sleep(self.gap_s)  # the head read apart from what follows it
            writer.write(part)
            await writer.drain()
        return False


@contextmanager
def raw_generation(parts: list[bytes], gap_s: float = 0.1) -> Iterator[RawGeneration]:
    server = RawGeneration(parts, gap_s).start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def raw_server(answer: bytes) -> Iterator[str]:
    """A server answering every request, whatever its path, with `answer`, then closing; yields its URL."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                try:
                    connection.recv(65536)
                    connection.sendall(answer)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        try:
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close alone does not, on Linux)
        except OSError:
            pass
        listener.close()
        thread.join(5)
