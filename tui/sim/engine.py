"""The asyncio driver: runs the physics in real time and hands each token to its stream.

Steps are laid end to end on the monotonic clock (`now`): each step ends at an absolute deadline
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
from typing import NamedTuple

from tui.core.experiments.disaggregation import time_sliced_s
from tui.sim.physics import Engine, Sequence, StepPlan, TokenOut
from tui.sim.step_cost import EngineConfig

LAG_SAMPLES_MAX = 200_000
"""`lag_s` keeps at most this many samples; past it, the older half goes."""
RESYNC_S = 0.1
"""A step that starts this late (seconds) starts from now rather than from its deadline."""
TIMER_SLACK_S = 0.0015
"""The event loop's timers wake up to 1 ms late (epoll's millisecond timeout, rounded up), so the
loop sleeps until this long before a deadline and a short blocking sleep covers the rest."""


def now() -> float:
    """The simulator's clock, for every stamp and deadline: `time.monotonic()`, not `loop.time()`. uvloop's clock is
    libuv's, whole milliseconds read once an iteration: a step's rest taken from it overslept by up to 1 ms, in a
    sawtooth against the step (ITL p99 1.2 × p50 on a steady simulator). Both count from the same boot-time origin
    (asyncio's loop clock is `time.monotonic()` itself), so the loop's timers still wake on time."""
    return time.monotonic()


async def sleep_until(loop: asyncio.AbstractEventLoop, deadline: float) -> None:
    """Sleep to an absolute deadline on `now()`'s clock, to within the OS timer's slack (~0.1 ms), not 1 ms."""
    early = deadline - now() - TIMER_SLACK_S
    if early > 0:
        await asyncio.sleep(early)
    rest = deadline - now()
    if rest > 0:
        time.sleep(rest)  # under 1.5 ms: blocks the loop only while it has nothing due before the deadline


def due_now(held: list[tuple[int, bool]], stream_interval: int) -> bool:
    """Whether the tokens sampled and not yet sent ((index, finished), oldest first) go out now: vLLM's rule
    (`v1/engine/output_processor.py`, `make_request_output`): the first token at once, then once `stream_interval`
    have gathered since the last chunk, and whatever is left when the request finishes."""
    return held[0][0] == 0 or held[-1][1] or len(held) >= stream_interval


class TokenEvent(NamedTuple):
    """One sampled token, due at `due` (`now`'s clock); `finished` on the last one."""

    index: int
    due: float
    finished: bool


class Stream:
    """A request's view of the engine: the TokenEvents due and not yet taken, and the sequence for its timings.

    The engine stages each step's events before its deadline (a streamed answer frames them then, in
    `prepare`) and releases them into `pending` at it. A streamed answer sets `deliver`, which
    the engine calls right then, so the chunk is written from the step loop with no task switch
    (`streaming.TokenStreamResponse`); an answer collected whole awaits `take()`. Either way a stream
    costs one hand-over per step however far behind it is: a plain list, not an `asyncio.Queue` per token.
    """

    __slots__ = ("sequence", "pending", "staged", "closed", "deliver", "prepare", "held", "_waiter", "_loop")

    def __init__(self, sequence: Sequence) -> None:
        self.sequence = sequence
        self.pending: list[TokenEvent] = []
        self.staged: list[TokenEvent] = []
        """Events known before their deadline, not yet due: no reader sees them until `release()`."""
        self.closed = False
        """The client went away: its writer stops, and its request is aborted."""
        self.deliver: Callable[[], None] | None = None
        """Called as events are pushed (and on close), instead of waking a `take()`."""
        self.prepare: Callable[[], None] | None = None
        """Called as events are staged before their deadline: the writer frames them then, so only the send
        is left for after it."""
        self.held: list[tuple[int, bool]] = []
        """(index, finished) of tokens sampled and not yet sent, under a stream interval (`due_now`)."""
        self._waiter: asyncio.Future[None] | None = None
        self._loop = asyncio.get_running_loop()

    def push(self, event: TokenEvent) -> None:
        self.stage(event)
        self.release()

    def stage(self, event: TokenEvent) -> None:
        """An event known before it is due: kept apart (a streamed answer frames it now) until `release()`."""
        self.staged.append(event)
        prepare = self.prepare
        if prepare is not None:
            prepare()

    def stage_all(self, events: list[TokenEvent]) -> None:
        """Several events due at once (one chunk: a speculative step's, a stream interval's), framed together."""
        self.staged.extend(events)
        prepare = self.prepare
        if prepare is not None:
            prepare()

    def release(self) -> None:
        """The staged events are due: hand them over."""
        if self.staged:  # not taken by `prepare`
            self.pending.extend(self.staged)
            self.staged = []
        deliver = self.deliver
        if deliver is not None:
            deliver()
        else:
            self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    async def take(self) -> list[TokenEvent]:
        """Every event due and not yet taken, in order, waiting for the first; empty once closed."""
        while not self.pending:
            if self.closed:
                return []
            self._waiter = self._loop.create_future()
            await self._waiter
        events, self.pending = self.pending, []
        return events

    def _wake(self) -> None:
        if self.deliver is not None:
            self.deliver()
            return
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class EngineDriver:
    """Owns the physics and the step loop; `submit` adds a request, `abort` drops one."""

    def __init__(
        self,
        config: EngineConfig,
        time_scale: float = 1.0,
        on_step: Callable[[StepPlan, list[TokenOut], float], None] | None = None,
        stream_interval: int = 1,
    ) -> None:
        self.engine = Engine(config)
        self.config = config
        self.time_scale = time_scale
        self.stream_interval = stream_interval
        """vLLM's --stream-interval: tokens gathered into one chunk (`due_now`)."""
        self.on_step = on_step
        """Called after each step with the plan, the tokens, and the step's end (`now`'s clock)."""
        self._streams: dict[Sequence, Stream] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._ids = itertools.count()
        self.on_pull: Callable[[Sequence], None] | None = None
        """Called with each sequence whose blocks were reserved for a KV transfer: start its pull, then `receive` it."""
        self.device_peers: tuple[EngineDriver, ...] = ()
        """Other engines on the same device (`sim --split-one-device`): while they are busy, steps here take longer."""
        self.step_end = 0.0
        """When the step under way ends (`now`'s clock): it is busy until then, though its outcome was applied at its start."""
        self.lag_s: list[float] = []
        """Emission lag samples (written − due, seconds), filled by the writers via `record_written`."""

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
        """Queue a request; its tokens arrive on the returned stream (`await stream.take()`)."""
        sequence = Sequence(
            f"{next(self._ids)}", tuple(prompt_ids), max_tokens, arrival=now(), finish_reason=finish_reason
        )
        stream = Stream(sequence)
        self.attach(stream)
        return stream

    def attach(self, stream: Stream) -> None:
        """Queue a stream made elsewhere (a disaggregated front's, whose sequence arrived there first)."""
        self.engine.add(stream.sequence)
        self._streams[stream.sequence] = stream
        self._wake.set()

    def receive(self, sequence: Sequence) -> None:
        """A sequence's pulled KV arrived: it can run."""
        self.engine.receive(sequence)
        self._wake.set()

    def abort(self, stream: Stream) -> None:
        """The client went away (or the request ended): free its KV blocks now."""
        self._streams.pop(stream.sequence, None)
        if not stream.sequence.finished:
            self.engine.abort(stream.sequence)

    def record_written(self, written: float, events: list[TokenEvent]) -> None:
        """Lag samples for events whose chunk was handed to the socket at `written` (`now`'s clock)."""
        lag_s = self.lag_s
        lag_s.extend([written - event.due for event in events])
        if len(lag_s) > LAG_SAMPLES_MAX:
            del lag_s[: LAG_SAMPLES_MAX // 2]

    def _stage_chunks(self, tokens: list[TokenOut], end: float) -> list[Stream]:
        """Stage each stream's tokens of this step as one chunk, or hold them under the stream interval until
        `due_now` says they go; the streams staged."""
        streams, staged = self._streams, []
        by_stream: dict[Stream, list[tuple[int, bool]]] = {}
        for token in tokens:
            stream = streams.get(token.sequence)
            if stream is None:
                continue
            by_stream.setdefault(stream, []).append((token.index, token.finished))
            if token.finished:
                del streams[token.sequence]
        for stream, sampled in by_stream.items():
            stream.held += sampled
            if due_now(stream.held, self.stream_interval):
                stream.stage_all([TokenEvent(index, end, finished) for index, finished in stream.held])
                stream.held = []
                staged.append(stream)
        return staged

    @property
    def running(self) -> int:
        return len(self.engine.running)

    @property
    def waiting(self) -> int:
        return len(self.engine.waiting)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_start = now()
        while True:
            if not self.engine.has_work:
                self._wake.clear()
                await self._wake.wait()
                next_start = now()
            started = now()
            if started - next_start > RESYNC_S:
                next_start = started
            next_start = self.engine.step_start(next_start)
            plan = self.engine.schedule(next_start)
            if self.on_pull is not None:
                for sequence in plan.pulls:
                    self.on_pull(sequence)
            if not plan.items:  # nothing fits yet (validated: only while a pulled KV is on its way); wait for a change
                self._wake.clear()
                await self._wake.wait()
                next_start = now()
                continue
            # Time-sliced with the peers busy as the step starts, each getting its share of the device (their load
            # may change mid-step: a step's time is fixed at its start, so its tokens can be framed before it ends).
            busy = 1 + sum(1 for peer in self.device_peers if peer.engine.has_work or peer.step_end > next_start)
            end = self.step_end = next_start + time_sliced_s(plan.duration_s, busy) * self.time_scale
            # The step's outcome is known before its deadline: work it out and frame its chunks while waiting,
            # so that after the deadline only the sends are left (256 of them are most of a step's time).
            tokens = self.engine.complete(plan, end)
            streams = self._streams
            staged = []
            if self.stream_interval == 1 and self.config.speculation is None:  # a token a stream: the lean path
                for token in tokens:
                    stream = streams.get(token.sequence)
                    if stream is None:
                        continue
                    stream.stage(TokenEvent(token.index, end, token.finished))
                    staged.append(stream)
                    if token.finished:
                        del streams[token.sequence]
            else:
                staged = self._stage_chunks(tokens, end)
            await sleep_until(loop, end)
            for stream in staged:
                stream.release()
            if self.on_step is not None:
                self.on_step(plan, tokens, end)
            next_start = end
