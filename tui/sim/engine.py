"""The asyncio driver: runs the physics in real time and hands each token to its stream.

Steps are laid end to end on the loop's monotonic clock: each step ends at an absolute deadline
(`start + duration × time_scale`) and the next starts at that deadline, not at "now", so sleeps
never accumulate error. When the process falls behind, tokens go out late but in order, and the
simulated clock catches up; after a stall longer than `RESYNC_S` it restarts from now instead of
bursting the backlog.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

from tui.sim.physics import Engine, EngineConfig, Sequence, StepPlan, TokenOut

RESYNC_S = 0.1
"""A step that starts this late (loop seconds) starts from now rather than from its deadline."""
TIMER_SLACK_S = 0.0015
"""The event loop's timers wake up to 1 ms late (epoll's millisecond timeout, rounded up), so the
loop sleeps until this long before a deadline and a short blocking sleep covers the rest."""


async def _sleep_until(loop: asyncio.AbstractEventLoop, deadline: float) -> None:
    """Sleep to an absolute loop-clock deadline, to within the OS timer's slack (~0.1 ms), not 1 ms."""
    early = deadline - loop.time() - TIMER_SLACK_S
    if early > 0:
        await asyncio.sleep(early)
    rest = deadline - loop.time()
    if rest > 0:
        time.sleep(rest)  # under 1.5 ms: blocks the loop only while it has nothing due before the deadline


@dataclass(frozen=True, slots=True)
class TokenEvent:
    """One sampled token, due at `due` (loop clock); `finished` on the last one."""

    index: int
    due: float
    finished: bool


class Stream:
    """A request's view of the engine: a queue of TokenEvents, and the sequence for its timings."""

    def __init__(self, sequence: Sequence) -> None:
        self.sequence = sequence
        self.queue: asyncio.Queue[TokenEvent] = asyncio.Queue()


class EngineDriver:
    """Owns the physics and the step loop; `submit` adds a request, `abort` drops one."""

    def __init__(
        self,
        config: EngineConfig,
        time_scale: float = 1.0,
        on_step: Callable[[StepPlan, list[TokenOut], float], None] | None = None,
    ) -> None:
        self.engine = Engine(config)
        self.config = config
        self.time_scale = time_scale
        self.on_step = on_step
        """Called after each step with the plan, the tokens, and the step's end (loop clock)."""
        self._streams: dict[Sequence, Stream] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._ids = itertools.count()
        self.lag_s: list[float] = []
        """Emission lag samples (written − due, seconds), filled by the writers via `record_lag`."""

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="sim-engine")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def submit(self, prompt_ids: list[int], max_tokens: int, finish_reason: str = "length") -> Stream:
        """Queue a request; its tokens arrive on the returned stream's queue."""
        loop = asyncio.get_running_loop()
        sequence = Sequence(
            f"{next(self._ids)}", tuple(prompt_ids), max_tokens, arrival=loop.time(), finish_reason=finish_reason
        )
        self.engine.add(sequence)
        stream = Stream(sequence)
        self._streams[sequence] = stream
        self._wake.set()
        return stream

    def abort(self, stream: Stream) -> None:
        """The client went away (or the request ended): free its KV blocks now."""
        self._streams.pop(stream.sequence, None)
        if not stream.sequence.finished:
            self.engine.abort(stream.sequence)

    def record_lag(self, lag_s: float) -> None:
        self.lag_s.append(lag_s)
        if len(self.lag_s) > 200_000:
            del self.lag_s[:100_000]

    @property
    def running(self) -> int:
        return len(self.engine.running)

    @property
    def waiting(self) -> int:
        return len(self.engine.waiting)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_start = loop.time()
        while True:
            if not self.engine.has_work:
                self._wake.clear()
                await self._wake.wait()
                next_start = loop.time()
            now = loop.time()
            if now - next_start > RESYNC_S:
                next_start = now
            plan = self.engine.schedule(next_start)
            if not plan.items:  # nothing fits yet (cannot happen with a validated config); wait for a change
                self._wake.clear()
                await self._wake.wait()
                next_start = loop.time()
                continue
            end = next_start + plan.duration_s * self.time_scale
            await _sleep_until(loop, end)
            tokens = self.engine.complete(plan, end)
            for token in tokens:
                stream = self._streams.get(token.sequence)
                if stream is None:
                    continue
                stream.queue.put_nowait(TokenEvent(token.index, end, token.finished))
                if token.finished:
                    del self._streams[token.sequence]
            if self.on_step is not None:
                self.on_step(plan, tokens, end)
            next_start = end
