"""A pooled keep-alive connection the server has already given up on: sent once more, on a new connection.

llama-server closes the connection after every streamed answer although it announces keep-alive; a
request the client writes into it before the close arrives gets no response at all. The tiny
server here plays the losing side of that race every time: after a streamed answer it leaves the
connection open, and when the next request comes on it, closes without answering
(a FIN, or a reset as when unread bytes are left behind).
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import struct
from dataclasses import dataclass, field

import pytest

from tui.sources.detect import ServerInfo
from tui.sources.http import make_client
from tui.sources.stream import StreamRequest, measure, warm_up
from tui.sources.wall_clock import now_unix
from tui.sources.workloads.load import LoadDial, LoadRunner, Workload
from tui.sources.workloads.prompts import prompt_of

TOKENS = [" a", " b", " c", " d"]
TTFT_S = 0.02
ITL_S = 0.005
DROP_AFTER_S = 0.4
"""How long a request on a spent connection waits before the server closes on it: were that wait in
the retried request's TTFT, it would show."""


@dataclass
class OneAnswerPerConnection:
    """A llama.cpp stand-in that serves one streamed answer per connection; JSON answers keep it open."""

    on_reuse: str = "close"
    """What a request on a spent connection gets: "close" (FIN), "reset" (RST), or "cut" (a streamed
    answer that dies after two tokens: the server fails mid-answer)."""
    answered: list[str] = field(default_factory=list)
    """Path of each request that got a complete response."""
    dropped_unix: list[float] = field(default_factory=list)
    """When each request on a spent connection was dropped (on the requests' own clock, `wall_clock`: a wall clock stepped under the test moves neither)."""
    spent_from_start: bool = False
    """Drop even the first request on each connection."""
    cut: int = 0
    connections: int = 0
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        spent = self.spent_from_start
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                method, path = head.decode("latin-1").split(" ", 2)[:2]
                length = _content_length(head)
                if spent and self.on_reuse != "cut":
                    await asyncio.sleep(DROP_AFTER_S)
                    if self.on_reuse == "reset":  # linger 0: close sends a reset, as a close with unread bytes does
                        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    else:
                        await reader.readexactly(length)
                    self.dropped_unix.append(now_unix())
                    return
                body = json.loads(await reader.readexactly(length) or b"{}")
                if method == "GET":
                    _send_json(writer, {"status": "ok"})
                elif path == "/tokenize":
                    _send_json(writer, {"tokens": list(range(len(body["content"].split())))})
                else:
                    if spent:  # on_reuse "cut"
                        await _stream(writer, body, TOKENS[:2])
                        self.cut += 1
                        writer.transport.abort()
                        return
                    await _stream(writer, body, TOKENS)
                    spent = True
                await writer.drain()
                self.answered.append(path)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()


def _content_length(head: bytes) -> int:
    for line in head.decode("latin-1").split("\r\n"):
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            return int(value)
    return 0


def _send_json(writer: asyncio.StreamWriter, obj: object) -> None:
    body = json.dumps(obj).encode()
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body))


async def _stream(writer: asyncio.StreamWriter, request: dict, tokens: list[str]) -> None:
    """llama.cpp's native /completion stream: a chunk per token, then the `stop: true` chunk (if all were sent)."""
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                 b"Keep-Alive: timeout=5, max=100\r\n\r\n")
    await asyncio.sleep(TTFT_S)
    events = [{"content": token, "stop": False} for token in tokens]
    if tokens == TOKENS:
        events.append({"content": "", "stop": True, "tokens_predicted": len(tokens),
                       "tokens_evaluated": len(request["prompt"].split())})
    for event in events:
        data = b"data: " + json.dumps(event).encode() + b"\n\n"
        writer.write(b"%x\r\n%b\r\n" % (len(data), data))
        await writer.drain()
        await asyncio.sleep(ITL_S)
    if tokens == TOKENS:
        writer.write(b"0\r\n\r\n")


@pytest.fixture
async def server(request):
    """The stand-in on a free loopback port, in the test's own event loop; `on_reuse` from indirect parametrize."""
    stand_in = OneAnswerPerConnection(getattr(request, "param", "close"))
    listener = await asyncio.start_server(stand_in.handle, "127.0.0.1", 0)
    stand_in.port = listener.sockets[0].getsockname()[1]
    yield stand_in
    listener.close()


def _request(prompt: str = "[n0nce] the quick brown fox") -> StreamRequest:
    return StreamRequest("llamacpp", "m", prompt, len(TOKENS))


@pytest.mark.parametrize("server", ["close", "reset"], indirect=True)
async def test_a_request_on_a_connection_the_server_gave_up_is_sent_again_on_a_new_one(server):
    async with make_client(server.url) as client:
        first = await measure(client, _request())
        again = await measure(client, _request())  # the pool hands it the spent connection
    assert first.ok, first.error
    assert again.ok, again.error
    assert again.text == "".join(TOKENS) and again.output_tokens == len(TOKENS)
    assert len(server.dropped_unix) == 1, "the first send went on the spent connection"
    assert server.answered == ["/completion", "/completion"], "answered once each, never twice"
    assert server.connections == 2
    # The clock restarted with the resend: its body went out after the drop, and the drop's wait is not in TTFT.
    assert again.t_sent_unix > server.dropped_unix[0]
    assert TTFT_S <= again.ttft_s < DROP_AFTER_S / 2
    assert again.connect_s is not None, "the resend opened (and timed) its own connection"


async def test_tokenize_and_warm_up_after_a_stream_get_their_answers(server):
    """Not only streams: the JSON requests sent between them (httpx's pool) and the warm-up after them (the
    stream pool, whose spent connection the second stream found and dropped) get their answers."""
    async with make_client(server.url) as client:
        await measure(client, _request())
        prompt = await prompt_of(client, "llamacpp", "m", 12)
        again = await measure(client, _request(prompt.text))
        await warm_up(client, "/health")
    assert prompt.tokens == 12 and not prompt.estimated, "/tokenize answered: the length is exact"
    assert again.ok, again.error
    assert len(server.dropped_unix) == 1, "the second stream went on the spent connection, and was resent"
    assert server.answered.count("/completion") == 2 and server.answered.count("/health") == 1


async def test_bench_load_on_shared_connections_finishes_every_request(server):
    """The LoadRunner keeps one client for the run: at concurrency 2, nearly every send lands on a spent connection."""
    async with make_client(server.url, max_connections=2) as client:
        runner = LoadRunner(client, ServerInfo("llamacpp", server.url, "m"), Workload(8, len(TOKENS), num_prompts=10, seed=3),
                            LoadDial(math.inf, 2))
        result = await runner.run()
    assert [r.error for r in result.requests if not r.ok] == []
    assert len(result.requests) == 10 and result.aborted is None
    assert server.answered.count("/completion") == 10
    assert len(server.dropped_unix) >= 3, "the stand-in did drop requests sent on spent connections"


@pytest.mark.parametrize("server", ["cut"], indirect=True)
async def test_a_server_dying_mid_answer_on_a_reused_connection_is_never_resent(server):
    async with make_client(server.url) as client:
        assert (await measure(client, _request())).ok
        cut = await measure(client, _request())
    assert not cut.ok
    assert "closed mid-answer" in cut.error
    assert len(cut.token_offsets_s) == 2, "the tokens that arrived are kept"
    assert server.cut == 1 and server.connections == 1, "sent once: no second connection"


async def test_a_new_connection_closed_without_an_answer_is_not_resent(server):
    """Only a reused connection can be stale: on a new one, a missing answer is the server's own failure."""
    server.spent_from_start = True
    async with make_client(server.url) as client:
        dropped = await measure(client, _request())
    assert not dropped.ok
    assert "without sending a response" in dropped.error
    assert len(server.dropped_unix) == 1 and server.connections == 1, "sent once: no second connection"
