"""The token streams at scale, and the writer's pieces: 256 streams at once, a slow reader."""

from __future__ import annotations

import asyncio
import json

import httpx

from tui.sim.engine import Stream, TokenEvent
from tui.sim.physics import Sequence
from tui.sim.streaming import _Writer, resume

STREAMS = 256
MAX_TOKENS = 12


async def _stream_one(client: httpx.AsyncClient, index: int, chat: bool) -> tuple[int, dict]:
    """One streamed answer: (events that carry a choice, the usage object)."""
    path = "/v1/chat/completions" if chat else "/v1/completions"
    request = {"max_tokens": MAX_TOKENS, "stream": True, "stream_options": {"include_usage": True}}
    if chat:
        request["messages"] = [{"role": "user", "content": f"stream {index}: why is decode memory-bound?"}]
    else:
        request["prompt"] = f"stream {index}: why is decode memory-bound?"
    content, usage = 0, None
    async with client.stream("POST", path, json=request) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: "):])
            if chunk["choices"]:
                content += 1
            else:
                usage = chunk["usage"]
    assert usage is not None, f"stream {index} ended without usage"
    return content, usage


async def test_256_concurrent_streams_all_complete_with_their_token_counts(start_sim):
    sim = start_sim("--max-num-seqs", str(STREAMS))  # every stream in the batch at once
    limits = httpx.Limits(max_connections=STREAMS, max_keepalive_connections=STREAMS)
    async with httpx.AsyncClient(base_url=sim.url, limits=limits, timeout=60) as client:
        results = await asyncio.gather(*(_stream_one(client, i, chat=i % 2 == 1) for i in range(STREAMS)))
    chat_events = MAX_TOKENS + 1  # the role chunk opens a chat stream
    for index, (content, usage) in enumerate(results):
        assert usage["completion_tokens"] == MAX_TOKENS, index
        assert content == (chat_events if index % 2 else MAX_TOKENS), index


async def test_resume_finishes_a_coroutine_that_suspended():
    gate = asyncio.get_running_loop().create_future()
    steps = []

    async def writes() -> None:
        steps.append("before")
        await gate
        await asyncio.sleep(0)
        steps.append("after")

    coroutine = writes()
    suspended_on = coroutine.send(None)
    assert suspended_on is gate and steps == ["before"]
    finishing = asyncio.ensure_future(resume(coroutine, suspended_on))
    await asyncio.sleep(0)
    assert not finishing.done()
    gate.set_result(None)
    await finishing
    assert steps == ["before", "after"]


class _Frames:
    def frame(self, events: list[TokenEvent], parts: list[bytes]) -> None:
        parts.append(b"".join(b"t%d;" % event.index for event in events))

    def closing(self, sequence: Sequence) -> bytes:
        return b"end;"


class _Driver:
    def __init__(self) -> None:
        self.lag_s: list[float] = []

    def record_written(self, written: float, events: list[TokenEvent]) -> None:
        self.lag_s.extend(written - event.due for event in events)


async def test_a_write_that_waits_for_a_slow_reader_is_caught_up_in_one_write():
    loop = asyncio.get_running_loop()
    drained = loop.create_future()
    bodies: list[tuple[bytes, bool]] = []

    async def write(message: dict) -> None:
        if not bodies:
            await drained  # the first write finds the socket's buffer full
        bodies.append((message["body"], message["more_body"]))

    stream = Stream(Sequence("0", (1, 2, 3), 4, 0.0))
    driver = _Driver()
    writer = _Writer(stream, _Frames(), write, driver)
    now = loop.time()
    stream.push(TokenEvent(0, now, False))
    assert writer.busy and bodies == []
    stream.push(TokenEvent(1, now, False))  # due while the first write waits: held, not written
    stream.push(TokenEvent(2, now, False))
    drained.set_result(None)
    await asyncio.sleep(0.01)
    assert bodies == [(b"t0;", True), (b"t1;t2;", True)] and not writer.busy
    stream.push(TokenEvent(3, now, True))
    assert bodies[-1] == (b"t3;end;", False)
    assert writer.done.done() and len(driver.lag_s) == 4
