"""The meter process, `python -m tui.meter`: it owns its parent's token streams, stamps every chunk through a
`LocalMeter` (the same reading loop the CLI times with), and reports what it read once a frame interval.

Its parent (the UI) renders; this process only reads, so no paint ever sits between a chunk's arrival and its
stamp. Commands come on stdin and events go out on stdout (`tui.meter.protocol`); the end of stdin (the parent
is gone) ends it. Ctrl-C in the terminal is the parent's to handle, so this process ignores SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable

from tui.core.measure.chunk_tokens import joined
from tui.core.measure.gaps import read_lateness, theirs
from tui.core.untrusted import one_line
from tui.meter.protocol import (FRAME_S, Cancel, Failed, Finished, Frame, Frames, Hello, LaneFrame, OpenServer, Stream,
                                WarmedUp, WarmUp, encode, error_of)
from tui.sources import loop, wall_clock
from tui.sources.errors import SourceError
from tui.sources.http import ServerClient, StreamTarget
from tui.sources.loop_watch import LoopWatch
from tui.sources.meter import ChunksArrived, LocalMeter
from tui.sources.stream import RequestFinished, RequestSent

READ_BYTES = 1 << 16


class _News:
    """One stream's chunks since its last frame, and where its reads stood (for the meter's own gaps)."""

    __slots__ = ("sent", "offsets", "sizes", "texts", "told", "sent_told", "last_read", "last_late")

    def __init__(self) -> None:
        self.sent: float | None = None
        self.offsets: list[float] = []
        self.sizes: list[int] | None = None
        """The tokens of each new chunk, once one carried other than one (`chunk_tokens.joined`)."""
        self.texts: list[str] = []
        self.told = 0
        """Chunks already reported."""
        self.sent_told = False
        self.last_read: float | None = None
        self.last_late = 0.0

    def take(self, job: int, watch: LoopWatch) -> LaneFrame | None:
        """The frame of what is new, with the gaps the meter's stalls explain among the new reads; None if nothing is."""
        if not self.offsets and (self.sent_told or self.sent is None):
            return None
        gaps: tuple[int, ...] = ()
        if self.offsets and self.sent is not None:
            reads = [self.sent + offset for offset in self.offsets]
            before = [self.last_read] if self.last_read is not None else []
            times = before + reads
            late = read_lateness(times, watch.stalls_between(times[0], reads[-1]))
            if before:
                late[0] = max(late[0], self.last_late)
            first_gap = self.told - len(before)  # the gap from the last read reported to the first new one
            gaps = tuple(first_gap + k for k in range(len(late) - 1) if theirs(times[k + 1] - times[k], late[k], late[k + 1]))
            self.last_read, self.last_late = reads[-1], late[-1]
        frame = LaneFrame(job, self.sent, tuple(self.offsets), "".join(self.texts), gaps,
                          tuple(self.sizes) if self.sizes is not None else None)
        self.told += len(self.offsets)
        self.offsets, self.sizes, self.texts, self.sent_told = [], None, [], True
        return frame


class MeterService:
    """Runs the parent's commands; `send` writes one event up the pipe."""

    def __init__(self, send: Callable[[object], None]) -> None:
        self._send = send
        self._frame_s = FRAME_S
        self._meters: dict[int, LocalMeter] = {}
        self._tasks: dict[int, asyncio.Task] = {}
        self._news: dict[int, _News] = {}
        self._framer: asyncio.Task | None = None

    def handle(self, command: object) -> None:
        if isinstance(command, Hello):
            wall_clock.set_offset(command.clock_offset_s)
            self._frame_s = command.frame_s
        elif isinstance(command, OpenServer):
            self._open(command.server, command.target)
        elif isinstance(command, WarmUp):
            self._start(command.job, self._warm(command))
        elif isinstance(command, Stream):
            self._news[command.job] = _News()
            self._start(command.job, self._stream(command))
            if self._framer is None:
                self._framer = asyncio.create_task(self._frames())
        elif isinstance(command, Cancel):
            task = self._tasks.get(command.job)
            if task is not None:
                task.cancel()

    def _open(self, server: int, target: StreamTarget) -> None:
        """A server's meter (its parent tells each meter process of a server once)."""
        if server not in self._meters:
            self._meters[server] = LocalMeter(ServerClient(*target))

    def _start(self, job: int, work) -> None:
        task = asyncio.create_task(work)
        self._tasks[job] = task
        task.add_done_callback(lambda done: self._done(job, done))

    def _done(self, job: int, task: asyncio.Task) -> None:
        """A job's end; one that raised (not a SourceError: those are its answer) tells its parent so."""
        self._tasks.pop(job, None)
        if not task.cancelled() and (error := task.exception()) is not None:
            self._send(Failed(job, f"internal error in the meter: {type(error).__name__}: {one_line(str(error), 200)}"))

    async def _warm(self, command: WarmUp) -> None:
        try:
            connect_s = await self._meters[command.server].warm_up(command.path, command.connections)
        except SourceError as failure:
            self._send(WarmedUp(command.job, None, error_of(failure)))
            return
        self._send(WarmedUp(command.job, connect_s))

    async def _stream(self, command: Stream) -> None:
        news = self._news[command.job]
        try:
            async for event in self._meters[command.server].stream(command.request, command.connect_s, command.text):
                if isinstance(event, ChunksArrived):
                    news.sizes = joined(news.sizes, len(news.offsets), event.tokens_per_chunk, len(event.offsets_s))
                    news.offsets.extend(event.offsets_s)
                    if event.text:
                        news.texts.append(event.text)
                elif isinstance(event, RequestSent):
                    news.sent = event.t_sent_unix
                elif isinstance(event, RequestFinished):
                    last = news.take(command.job, LoopWatch.of_running_loop())
                    if last is not None:  # its last chunks' text before its record
                        self._send(Frame((last,), None))
                    self._send(Finished(command.job, event.timing))
        finally:
            self._news.pop(command.job, None)

    async def _frames(self) -> None:
        """Once a frame interval while streams run: every stream's news in one frame."""
        watch = LoopWatch.of_running_loop()
        try:
            while self._news:
                await asyncio.sleep(self._frame_s)
                lanes = tuple(frame for job, news in list(self._news.items()) if (frame := news.take(job, watch)) is not None)
                if lanes:
                    self._send(Frame(lanes, watch.cpu_pct))
        finally:
            self._framer = None

    async def close(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        for meter in self._meters.values():
            await meter.client.aclose()


async def serve() -> None:
    """Run commands from stdin until it ends."""
    running = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await running.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    transport, _ = await running.connect_write_pipe(asyncio.Protocol, sys.stdout.buffer)
    service = MeterService(lambda event: transport.write(encode(event)))
    frames = Frames()
    try:
        while data := await reader.read(READ_BYTES):
            for command in frames.feed(data):
                service.handle(command)
    finally:
        await service.close()
        with contextlib.suppress(OSError):
            transport.close()


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    loop.run(serve())
