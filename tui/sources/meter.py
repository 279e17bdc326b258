"""The meter: what measures a request. Drivers (the load runner, the experiments, probe, the UI's sends) hand their
requests to a `Meter` and never stream themselves, so every figure comes from one reading loop (`stream.stream`).

`LocalMeter` runs it in the calling process, on the calling loop: the CLI's way (it renders nothing, so nothing
sits between a chunk's arrival and its stamp). The UI measures through a meter process instead (`tui.meter`),
whose `RemoteMeter` has the same three calls. Either watches its own loop (`LoopWatch`) and marks the gaps it
caused itself (`RequestTiming.client_gaps`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Protocol

from tui.core.measure.records import RequestTiming
from tui.sources.http import ServerClient
from tui.sources.loop_watch import LoopWatch
from tui.sources.stream import ChunkArrived, RequestFinished, RequestSent, StreamRequest, stream, warm_up


@dataclass(frozen=True, slots=True)
class ChunksArrived:
    """Content chunks read since the request's last event (one chunk from a `LocalMeter`, a frame's worth from a
    meter process). Untrusted text."""

    offsets_s: tuple[float, ...]
    """Arrival of each, seconds after the send."""
    text: str = ""
    """Their text, when it was asked for."""
    client_gaps: tuple[int, ...] = ()
    """Gaps found to be the client's so far (a meter process says as it goes; the final record has them all)."""
    tokens_per_chunk: tuple[int, ...] | None = None
    """The tokens each carried; None: one each (`chunk_tokens`)."""

    @property
    def tokens(self) -> int:
        return sum(self.tokens_per_chunk) if self.tokens_per_chunk is not None else len(self.offsets_s)


MeterEvent = RequestSent | ChunksArrived | RequestFinished


class Meter(Protocol):
    """Warms connections, streams requests and times them, for one server."""

    async def warm_up(self, path: str, connections: int = 1) -> float | None:
        """Open `connections` stream connections before timing; the connect time of one."""

    def stream(self, request: StreamRequest, connect_s: float | None = None, text: bool = False) -> AsyncIterator[MeterEvent]:
        """`RequestSent`, then `ChunksArrived` as chunks come (their text only when `text`), then `RequestFinished`
        with the exact record (failed or not). Closing it early stops the request."""

    async def measure(self, request: StreamRequest, connect_s: float | None = None) -> RequestTiming:
        """The request's exact record."""


class LocalMeter:
    """The meter in this process, over `client`'s token session."""

    def __init__(self, client: ServerClient) -> None:
        self.client = client

    async def warm_up(self, path: str, connections: int = 1) -> float | None:
        return await warm_up(self.client, path, connections)

    async def stream(self, request: StreamRequest, connect_s: float | None = None,
                     text: bool = False) -> AsyncIterator[MeterEvent]:
        watch = LoopWatch.of_running_loop()
        with watch.watching():
            async with aclosing(stream(self.client, request, connect_s)) as events:
                async for event in events:
                    if isinstance(event, ChunkArrived):
                        if event.tokens == 1:
                            yield ChunksArrived((event.offset_s,), event.text if text else "")
                        elif event.tokens:
                            yield ChunksArrived((event.offset_s,), event.text if text else "", (), (event.tokens,))
                        elif text:  # text that carried no token of its own
                            yield ChunksArrived((), event.text)
                    elif isinstance(event, RequestFinished):
                        yield RequestFinished(watch.judge(event.timing))
                    else:
                        yield event

    async def measure(self, request: StreamRequest, connect_s: float | None = None) -> RequestTiming:
        watch = LoopWatch.of_running_loop()
        with watch.watching():
            async for event in stream(self.client, request, connect_s):
                if isinstance(event, RequestFinished):
                    return watch.judge(event.timing)
        raise AssertionError("stream() always ends with RequestFinished")


async def timing_of(events: AsyncIterator[MeterEvent]) -> RequestTiming:
    """The record a meter's stream ends with."""
    async for event in events:
        if isinstance(event, RequestFinished):
            return event.timing
    raise AssertionError("a meter's stream always ends with RequestFinished")
