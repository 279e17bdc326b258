"""Failures a person can act on: a reset says "connection reset", a redirect says where to and is never followed."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from testbeds.scripted_server import Reply, Script
from tests.hostile import raw_controls, serving
from tui.sources.detect import detect_api
from tui.sources.errors import ProtocolError, ServerRejected
from tui.sources.http import make_client
from tui.sources.scrape import MetricsScraper
from tui.sources.stream import StreamRequest, measure, warm_up

ELSEWHERE = "http://elsewhere.example/v1"
SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
ONE_CHUNK = b'data: {"choices": [{"text": "Hello", "index": 0}]}\n\n'


@contextmanager
def resetting(before_reset: bytes = b"") -> Iterator[str]:
    """A server that reads each request, writes `before_reset`, then resets the connection (SO_LINGER 0: RST)."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.recv(65536)
                if before_reset:
                    connection.sendall(before_reset)
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        _close(listener)
        thread.join(5)


@contextmanager
def elsewhere() -> Iterator[tuple[str, list[bytes]]]:
    """Another host a redirect points to: it answers anything with 200 and keeps every request's first bytes."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                seen.append(connection.recv(65536))
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", seen
    finally:
        _close(listener)
        thread.join(5)


def _close(listener: socket.socket) -> None:
    """Close a listener and wake the thread blocked in its accept() (close alone does not, on Linux)."""
    try:
        listener.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    listener.close()


def _request() -> StreamRequest:
    return StreamRequest(api="openai", model="scripted-model", prompt="the quick brown fox", max_tokens=8)


async def test_a_reset_on_a_json_call_says_connection_reset():
    with resetting() as url:
        async with make_client(url) as client:
            with pytest.raises(ProtocolError) as failure:
                await detect_api(client)
    assert str(failure.value) == f"{url}: connection reset by the server"  # the server, not a path of one API


async def test_a_reset_on_metrics_says_connection_reset():
    with resetting() as url:
        async with make_client(url) as client:
            with pytest.raises(ProtocolError, match="connection reset by the server$"):
                await MetricsScraper(client).read()


@pytest.mark.parametrize(("before_reset", "said"), [
    (b"", "connection reset by the server"),
    (SSE_HEAD + b"%x\r\n" % len(ONE_CHUNK) + ONE_CHUNK + b"\r\n", "connection reset by the server mid-answer"),
])
async def test_a_reset_on_a_stream_says_connection_reset(before_reset, said):
    with resetting(before_reset) as url:
        async with make_client(url) as client:
            timing = await measure(client, _request())
    assert not timing.ok
    assert timing.error == f"{url}/v1/completions: {said}"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_redirect_on_detection_says_where_to(status):
    script = Script()
    for path in ("/api/version", "/props", "/v1/models"):
        script.replies[path] = Reply(b"", status=status, content_type="text/html", headers={"Location": ELSEWHERE})
    with serving(script) as server:
        async with make_client(server.url) as client:
            with pytest.raises(ServerRejected) as failure:
                await detect_api(client)
    assert str(failure.value) == (f"{server.url}/api/version: redirected (HTTP {status}) to {ELSEWHERE}, "
                                  "not followed: point --url at the server itself")


async def test_a_redirected_metrics_says_where_to():
    script = Script()
    script.replies["/metrics"] = Reply(b"<html>moved</html>", status=301, content_type="text/html", headers={"Location": ELSEWHERE})
    with serving(script) as server:
        async with make_client(server.url) as client:
            with pytest.raises(ServerRejected) as failure:
                await MetricsScraper(client).read()
    assert str(failure.value) == (f"{server.url}/metrics: redirected (HTTP 301) to {ELSEWHERE}, "
                                  "not followed: point --url at the server itself")


async def test_a_redirect_location_is_shown_safely():
    script = Script()
    script.replies["/api/version"] = Reply(b"", status=302, headers={"Location": "http://evil.example/\u202e\x9b[2J"})
    with serving(script) as server:
        async with make_client(server.url) as client:
            with pytest.raises(ServerRejected) as failure:
                await detect_api(client)
    message = str(failure.value)
    assert "redirected (HTTP 302) to http://evil.example/\\u202e\\x9b[2J" in message
    assert not raw_controls(message), raw_controls(message)


@pytest.mark.parametrize("status", [302, 307, 308])
async def test_a_redirected_stream_is_not_followed_to_another_host(status):
    """The other host listens: it must see no request (a 307/308 would resend the prompt and the key there)."""
    with elsewhere() as (other_url, seen):
        script = Script()
        target = f"{other_url}/v1/completions"
        script.replies["/v1/completions"] = Reply(b"<html>moved</html>", status=status, content_type="text/html",
                                                  headers={"Location": target})
        with serving(script) as server:
            async with make_client(server.url, timeout_s=5.0) as client:
                timing = await measure(client, _request())
    assert not timing.ok
    assert timing.error == (f"{server.url}/v1/completions: redirected (HTTP {status}) to {target}, "
                            "not followed: point --url at the server itself")
    assert seen == []


async def test_a_redirected_warm_up_is_not_followed_and_says_so():
    with elsewhere() as (other_url, seen):
        script = Script()
        script.replies["/v1/models"] = Reply(b"", status=302, headers={"Location": f"{other_url}/v1/models"})
        with serving(script) as server:
            async with make_client(server.url, timeout_s=5.0) as client:
                with pytest.raises(ServerRejected, match=r"redirected \(HTTP 302\) to http://127\.0\.0\.1:\d+/v1/models"):
                    await warm_up(client, "/v1/models")
    assert seen == []
