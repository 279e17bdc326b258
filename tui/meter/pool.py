"""Meter processes for a UI or a CLI run: one, or several sharing the streams (`--meters N`), on one clock.

Each stream goes to the meter with the fewest in flight; a warm-up opens each meter's share of the connections.
Every meter stamps with `perf_counter` read through its parent's offset (`wall_clock`), and perf_counter is
system-wide, so the records of all of them merge into one set on one clock.

Why several: one meter keeps its stamps on time to about 25,000 chunks a second on one core (256 streams of 100 a
second in bench/fidelity.py) and reads about 30,000 flat out (bench/meter_memory.py); past that its stamps queue
behind its own work. N meters on N free cores read N times as many.
On a host with few cores free (this project's 2-core machine, the server beside it) a second meter only
competes with the first and the server, so the default is as many as the streams need and the free cores allow.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing

from tui.core.measure.chunk_tokens import compact, joined
from tui.core.measure.records import RequestTiming
from tui.meter.link import LoopSink, MeterEnded, MeterLink
from tui.meter.protocol import FRAME_S, Finished, LaneFrame, Stream, WarmedUp, WarmUp, raised
from tui.sources.http import ServerClient
from tui.sources.meter import ChunksArrived, MeterEvent, timing_of
from tui.sources.stream import RequestFinished, RequestSent, StreamRequest
from tui.sources.wall_clock import now_unix

CHUNKS_PER_METER_S = 25_000
"""Chunks a second one meter reads on one core with its stamps still on time (bench/fidelity.py, 256 streams)."""
CPU_FRESH_S = 2.0
"""A meter's CPU reading older than this is not current: it has read nothing since (an idle meter sends no frames)."""
STREAM_CHUNKS_S = 200
"""Chunks a second one stream brings at most on the fastest devices phasetop knows (an H100 decoding an 8B model)."""


def default_meters(concurrency: int, renders: bool) -> int:
    """As many meters as `concurrency` streams need (`CHUNKS_PER_METER_S` each), no more than the cores free now
    (the 1-minute load average taken off the cores; one more kept for a UI that renders), and at least one."""
    needed = math.ceil(max(concurrency, 1) * STREAM_CHUNKS_S / CHUNKS_PER_METER_S)
    try:
        busy = os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows has no load average
        busy = 0.0
    free = int((os.cpu_count() or 1) - busy - (1 if renders else 0))
    return max(1, min(needed, free))


class MeterPool:
    """`count` meter processes; `meter_for(client)` measures through them."""

    def __init__(self, count: int = 1, frame_s: float = FRAME_S, on_ended: Callable[[str], None] | None = None) -> None:
        if count < 1:
            raise ValueError("a meter pool needs at least one meter")
        self.links = [MeterLink(frame_s, on_ended) for _ in range(count)]
        self._jobs = itertools.count(1)
        self._servers: dict[tuple, int] = {}
        """One id per distinct target: a client made anew for each send still streams over the same meter session."""

    def start(self) -> None:
        """Start every meter process now (else the first stream waits for its meter's start, a few tenths of a second)."""
        for link in self.links:
            link.start()

    def close(self) -> None:
        for link in self.links:
            link.close()

    def meter_for(self, client: ServerClient) -> RemoteMeter:
        """The meter of `client`'s server (its JSON calls stay on `client`, in this process)."""
        target = client.stream_target
        key = (target.base_url, tuple(sorted(target.headers.items())), target.timeout_s, target.max_connections, target.limits)
        server = self._servers.setdefault(key, len(self._servers) + 1)
        return RemoteMeter(self, client, server)

    @property
    def cpu_pct(self) -> float | None:
        """The busiest meter's CPU, percent of one core (its stamps are the first to queue); None while none reads."""
        fresh = time.monotonic() - CPU_FRESH_S
        readings = [link.cpu_pct for link in self.links if link.cpu_pct is not None and link.cpu_read_at >= fresh]
        return max(readings) if readings else None

    def next_job(self) -> int:
        return next(self._jobs)

    def least_busy(self) -> MeterLink:
        return min(self.links, key=lambda link: link.in_flight)


class RemoteMeter:
    """A `tui.sources.meter.Meter` whose streams are read by the pool's meter processes."""

    def __init__(self, pool: MeterPool, client: ServerClient, server: int) -> None:
        self.client = client
        self._pool = pool
        self._server = server

    async def warm_up(self, path: str, connections: int = 1) -> float | None:
        """Each meter opens its share of the connections (streams go to the least busy, so they spread evenly)."""
        links = self._pool.links[:max(1, min(connections, len(self._pool.links)))]
        share = math.ceil(connections / len(links))
        sinks = []
        for link in links:
            sink = LoopSink()
            link.submit(job := self._pool.next_job(), WarmUp(job, self._server, path, share), sink, self._server,
                        self.client.stream_target)
            sinks.append(sink)
        times = []
        for sink in sinks:
            answer = await sink.queue.get()
            if isinstance(answer, MeterEnded):
                raise raised(("SourceError", answer.reason))
            assert isinstance(answer, WarmedUp)
            if answer.error is not None:
                raise raised(answer.error)
            if answer.connect_s is not None:
                times.append(answer.connect_s)
        return max(times) if times else None

    async def stream(self, request: StreamRequest, connect_s: float | None = None,
                     text: bool = False) -> AsyncIterator[MeterEvent]:
        link = self._pool.least_busy()
        job = self._pool.next_job()
        sink = LoopSink()
        link.submit(job, Stream(job, self._server, request, connect_s, text), sink, self._server, self.client.stream_target)
        sent: float | None = None
        offsets: list[float] = []
        texts: list[str] = []
        gaps: list[int] = []
        sizes: list[int] | None = None
        ended = False
        try:
            while True:
                event = await sink.queue.get()
                if isinstance(event, LaneFrame):
                    if sent is None and event.t_sent_unix is not None:
                        sent = event.t_sent_unix
                        yield RequestSent(sent)
                    if event.offsets_s or event.text:
                        sizes = joined(sizes, len(offsets), event.tokens_per_chunk, len(event.offsets_s))
                        offsets.extend(event.offsets_s)
                        texts.append(event.text)
                        gaps.extend(event.client_gaps)
                        yield ChunksArrived(event.offsets_s, event.text, event.client_gaps, event.tokens_per_chunk)
                elif isinstance(event, Finished):
                    ended = True
                    yield RequestFinished(event.timing)
                    return
                elif isinstance(event, MeterEnded):
                    ended = True
                    yield RequestFinished(RequestTiming(ok=False, t_sent_unix=sent if sent is not None else now_unix(),
                                                        token_offsets_s=tuple(offsets), tokens_per_chunk=compact(sizes),
                                                        error=event.reason,
                                                        text="".join(texts), client_gaps=tuple(gaps)))
                    return
        finally:
            if not ended:
                link.cancel(job)

    async def measure(self, request: StreamRequest, connect_s: float | None = None) -> RequestTiming:
        async with aclosing(self.stream(request, connect_s)) as events:
            return await timing_of(events)
