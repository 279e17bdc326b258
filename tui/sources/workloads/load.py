"""Load on a server: requests sent on a gamma arrival schedule, at most so many at once, each timed.

The runner behind `phasetop bench`, built so the UI can drive it as a load dial too:

    dial = LoadDial(rate=4.0, concurrency=8)
    runner = LoadRunner(client, server, Workload(prompt_tokens=200, max_tokens=128), dial)
    task = asyncio.create_task(runner.run(on_finished=...))   # num_prompts None: runs until stop()
    dial.rate = 12.0             # from any thread; the runner notices within DIAL_POLL_S
    dial.concurrency = 2
    runner.progress()            # a LoadProgress snapshot, from any thread
    runner.stop()                # no more sends; requests in flight finish
    result = await task          # LoadResult

With a fixed `num_prompts` and a dial left alone, the send times are `vllm bench serve`'s (see
`tui.core.measure.arrivals`) and requests past the concurrency wait their turn in arrival order, as behind
vLLM's semaphore. The clock of each request starts when its body is on the wire (the meter's, `tui.sources.meter`),
so time spent waiting for a slot is not in its TTFT, as in vLLM.
"""

from __future__ import annotations

import asyncio
import math
import random
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from itertools import count
from time import perf_counter

from tui.core.measure.aggregates import EndlessRecord
from tui.core.measure.arrivals import Pacer, unit_gap, unit_schedule
from tui.core.measure.bench import bench_figures
from tui.core.measure.load_steps import LoadProgress
from tui.core.measure.records import RequestTiming
from tui.sources.detect import WARM_UP_PATHS, ServerInfo
from tui.sources.errors import ServerUnavailable, SourceError
from tui.sources.gate import Gate
from tui.sources.http import ServerClient
from tui.sources.meter import LocalMeter, Meter
from tui.sources.stream import StreamRequest
from tui.sources.wall_clock import now_unix
from tui.sources.workloads.prompts import Prompt, make_nonce, prompt_of, refit

DIAL_POLL_S = 0.05
"""How often the runner reads the dial: plain attributes, so any thread may turn it."""
RATE_WINDOW_S = 5.0
"""Finished requests over this many seconds make the progress's current rate."""
WARM_CONNECTIONS = 256
"""At most this many connections are opened before the first send."""
ENDLESS_SAMPLE = 500
"""Raw requests an endless run keeps (a uniform sample); its figures are kept over all of them."""
HORIZON_SLACK_S = 1.0
"""A request's send time is stamped on the wire, after `sending` was read; this much earlier covers the wait between."""


class LoadDial:
    """The knobs of a running load. Assign them from any thread; the runner reads them every DIAL_POLL_S.

    `rate`: requests a second (math.inf: all at once, 0: paused). `concurrency`: the most requests in
    flight (None: no limit); lowering it lets requests in flight finish. Bad values raise ValueError
    at assignment, so a UI hears of them at once.
    """

    def __init__(self, rate: float = math.inf, concurrency: int | None = None) -> None:
        self.rate = rate
        self.concurrency = concurrency

    def __setattr__(self, name: str, value: object) -> None:
        if name == "rate" and not (isinstance(value, int | float) and value >= 0):  # NaN fails too
            raise ValueError(f"request rate must be 0 or more, got {value!r}")
        if name == "concurrency" and value is not None and not (isinstance(value, int) and value >= 1):
            raise ValueError(f"concurrency must be at least 1, got {value!r}")
        super().__setattr__(name, value)

    def __repr__(self) -> str:
        return f"LoadDial(rate={self.rate}, concurrency={self.concurrency})"


FIT_AT_ONCE = 8
"""/tokenize calls in flight while a finite run fits its prompts (200 prompts: about a second on real vLLM)."""


@dataclass(frozen=True, slots=True)
class Workload:
    """What each request is (a fresh prompt of `prompt_tokens`, `max_tokens` back), how many, how bursty."""

    prompt_tokens: int
    max_tokens: int
    num_prompts: int | None = None
    """None: send until `stop()`."""
    burstiness: float = 1.0
    """Gamma shape of the gaps: 1 is Poisson. Fixed for the run."""
    chat: bool = False
    exact_length: bool = True
    """Ask for exactly `max_tokens` (see StreamRequest.exact_length)."""
    seed: int | None = None
    """Seeds the arrival schedule; None draws one (reported in LoadResult.seed)."""
    backlog: int | None = None
    """Most arrivals that may wait for a free slot; while that many wait, arrivals pause and the
    schedule restarts from the moment one can go. None is vLLM's way (no limit); an endless run at
    infinite rate needs a concurrency or a backlog."""
    sample: int = ENDLESS_SAMPLE
    """Raw requests an endless run keeps, a uniform sample of all (a finite run keeps every one)."""


@dataclass(frozen=True, slots=True)
class LoadResult:
    """A finished run: the timed requests in send order, and what the throughputs divide by."""

    requests: list[RequestTiming]
    duration_s: float
    """From the start of the arrival schedule to the end of the last request (vLLM's benchmark duration)."""
    started_unix: float
    """Wall clock at the start of the arrival schedule."""
    peak_in_flight: int
    """Most requests the runner had in flight at once."""
    seed: int
    aborted: str | None = None
    """Why the run stopped early (the server went away, or "interrupted"), or None."""
    endless: EndlessRecord | None = None
    """An endless run's figures over every request and its sample; `requests` then holds the sample only.
    None for a finite run, whose `requests` are all of them."""

    @property
    def total(self) -> int:
        """Requests that finished (well or not), sampled or not."""
        return self.endless.total if self.endless is not None else len(self.requests)

    def figures(self) -> dict:
        """`vllm bench serve`'s figures over every request of the run (an endless run's kept as it went)."""
        if self.endless is not None:
            return self.endless.figures.figures(self.duration_s)
        return bench_figures(self.requests, self.duration_s)

    def sample_note(self) -> dict | None:
        """For a run that keeps a sample of its raw requests: how many of how many (`runs` contract's
        `requests_sample`); None when `requests` are all."""
        return self.endless.note() if self.endless is not None else None


class LoadRunner:
    """Sends `workload` to `server` through `client`, paced by `dial`. One run per instance.

    The client must allow as many connections as the concurrency can reach (`make_client`'s
    `max_connections`), or requests wait in its pool, where their time is not measured but may run out.
    `meter` times the requests (default: a `LocalMeter` over `client`, in this process); `client` makes the prompts.
    """

    def __init__(self, client: ServerClient, server: ServerInfo, workload: Workload, dial: LoadDial,
                 meter: Meter | None = None) -> None:
        endless_burst = workload.num_prompts is None and math.isinf(dial.rate)
        if endless_burst and dial.concurrency is None and workload.backlog is None:
            raise ValueError("an endless load at infinite rate needs a concurrency or a backlog limit")
        if workload.num_prompts is not None and workload.num_prompts < 1:
            raise ValueError("num_prompts must be at least 1")
        self.client = client
        self.meter = meter or LocalMeter(client)
        self.server = server
        self.workload = workload
        self.dial = dial
        self.seed = workload.seed if workload.seed is not None else random.randrange(2**32)
        self._rng = random.Random(self.seed)
        self._gate = Gate(dial.concurrency)
        self._stopping = False
        self._aborted: str | None = None
        self._started: float | None = None
        self._sent = self._finished = self._failed = self._queued = 0
        self._next_unit = 0.0
        self._moved = asyncio.Event()
        self._checking = False
        self._finish_lock = threading.Lock()
        self._finished_at: deque[float] = deque()

    def stop(self, reason: str | None = None) -> None:
        """Send nothing more: requests in flight finish, arrivals waiting for a slot are dropped. Any thread.

        With a reason (e.g. "interrupted"), the run counts as cut short: `LoadResult.aborted` says it.
        """
        self._stopping = True
        if reason is not None:
            self._aborted = reason

    def progress(self) -> LoadProgress:
        """A snapshot of the run so far (zeros before it starts). Any thread."""
        now = perf_counter()
        elapsed = now - self._started if self._started is not None else 0.0
        with self._finish_lock:
            recent = sum(1 for t in self._finished_at if t > now - RATE_WINDOW_S)
        window = min(elapsed, RATE_WINDOW_S)
        return LoadProgress(
            planned=self.workload.num_prompts,
            sent=self._sent,
            finished=self._finished,
            failed=self._failed,
            in_flight=self._gate.in_flight,
            waiting=self._gate.waiting,
            elapsed_s=elapsed,
            recent_rps=recent / window if window > 0 else 0.0,
        )

    async def run(self, on_finished: Callable[[StreamRequest, RequestTiming], None] | None = None) -> LoadResult:
        """Run to the end (every request of `num_prompts` finished, or `stop()`).

        `on_finished(request, timing)` is called in the runner's loop as each request ends.

        Raises SourceError if the server cannot be reached before the first send. If it goes away
        mid-run, sending stops, the requests that finished are kept, and `LoadResult.aborted` says why.
        """
        if self._started is not None:
            raise RuntimeError("a LoadRunner runs once")
        workload = self.workload
        template = await prompt_of(self.client, self.server.kind, self.server.model, workload.prompt_tokens)
        prompts = await self._fit_all(template) if workload.num_prompts else None
        planned = workload.num_prompts
        connections = min(self.dial.concurrency or planned or WARM_CONNECTIONS, WARM_CONNECTIONS)
        await self.meter.warm_up(WARM_UP_PATHS[self.server.kind], connections)
        schedule = unit_schedule(planned, workload.burstiness, self._rng) if planned is not None else None
        timings: dict[int, RequestTiming] = {}
        """A finite run's requests, all kept."""
        endless = EndlessRecord(workload.sample, random.Random(self.seed)) if planned is None else None
        sending: dict[int, float] = {}
        """An endless run's requests in flight → just before each was sent, on the requests' own clock (`wall_clock`)."""
        tasks: set[asyncio.Task] = set()
        started_unix = now_unix()
        self._started = perf_counter()
        pacer = Pacer(self._started, self.dial.rate)
        watcher = asyncio.create_task(self._watch(pacer))

        async def one(index: int, request: StreamRequest) -> None:
            held = await self._gate.acquire()
            self._queued -= 1
            if not held or self._stopping:
                if held:
                    self._gate.release()
                return  # arrived, never sent
            self._sent += 1
            if endless is not None:
                sending[index] = now_unix()
            try:
                timing = await self.meter.measure(request)
            finally:
                self._gate.release()
                self._moved.set()
                sending.pop(index, None)
            if endless is None:
                timings[index] = timing
            else:
                endless.add(index, timing)
                endless.settle(min(sending.values(), default=now_unix()) - HORIZON_SLACK_S)
            self._finished += 1
            with self._finish_lock:
                now = perf_counter()
                self._finished_at.append(now)
                while self._finished_at[0] < now - RATE_WINDOW_S:
                    self._finished_at.popleft()
            if not timing.ok:
                self._failed += 1
                await self._check_alive()
            if on_finished is not None:
                on_finished(request, timing)

        try:
            unit_t = 0.0
            for index in range(planned) if planned is not None else count():
                unit_t = schedule[index] if schedule is not None else unit_t + unit_gap(workload.burstiness, self._rng)
                self._next_unit = unit_t
                if not await self._arrive(pacer, unit_t):
                    break
                self._queued += 1
                task = asyncio.create_task(one(index, self._request(prompts[index] if prompts else self._renonced(template))))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            watcher.cancel()
            for task in tasks:
                task.cancel()
        return LoadResult(
            requests=[timings[i] for i in sorted(timings)] if endless is None else endless.sample.items(),
            duration_s=perf_counter() - self._started,
            started_unix=started_unix,
            peak_in_flight=self._gate.peak,
            seed=self.seed,
            aborted=self._aborted,
            endless=endless,
        )

    async def _arrive(self, pacer: Pacer, unit_t: float) -> bool:
        """Wait until unit time `unit_t` falls due and the backlog has room; False once the run is stopping."""
        held_back = False
        while not self._stopping:
            self._moved.clear()
            timeout_s: float | None = None
            if self._backlog_full():
                held_back = True
            else:
                if held_back:  # the arrivals missed while full are not made up in a burst
                    pacer.set_rate(perf_counter(), pacer.rate, unit_t)
                    held_back = False
                wait_s = pacer.due_at(unit_t) - perf_counter()
                if wait_s <= 0:
                    return True
                timeout_s = None if math.isinf(wait_s) else wait_s
            try:
                async with asyncio.timeout(timeout_s):
                    await self._moved.wait()
            except TimeoutError:
                pass
        return False

    def _backlog_full(self) -> bool:
        backlog = self.workload.backlog
        return backlog is not None and self._queued >= backlog + self._gate.free

    async def _watch(self, pacer: Pacer) -> None:
        """Read the dial and the stop flag every DIAL_POLL_S, and wake whoever waits on them."""
        while True:
            await asyncio.sleep(DIAL_POLL_S)
            rate, concurrency = self.dial.rate, self.dial.concurrency
            if concurrency != self._gate.limit:
                self._gate.limit = concurrency
                self._gate.wake()
                self._moved.set()
            if rate != pacer.rate:
                pacer.set_rate(perf_counter(), rate, self._next_unit)
                self._moved.set()
            if self._stopping:
                self._gate.drop_waiters()
                self._moved.set()

    async def _check_alive(self) -> None:
        """After a failed request: if nothing answers at the server any more, stop the run and say why."""
        if self._checking or self._stopping:
            return
        self._checking = True
        try:
            await self.meter.warm_up(WARM_UP_PATHS[self.server.kind])
        except ServerUnavailable as error:
            self._aborted = f"the server went away: {error}"
            self.stop()
        except SourceError:
            pass  # it answered, if badly: a failed request, not a dead server
        finally:
            self._checking = False

    async def _fit_all(self, template: Prompt) -> list[Prompt]:
        """Every prompt of a finite run, fitted before the clock starts (a fresh nonce can change a prompt's
        length by a few tokens on a small vocabulary); from the template's shape, a call or two each."""
        async def one() -> Prompt:
            async with gate:
                return await refit(self.client, self.server.kind, self.server.model, template, self.workload.prompt_tokens)

        gate = asyncio.Semaphore(FIT_AT_ONCE)
        return [template, *await asyncio.gather(*(one() for _ in range(self.workload.num_prompts - 1)))]

    @staticmethod
    def _renonced(template: Prompt) -> Prompt:
        """The template under a fresh nonce, so no two requests share a cached prefix; for an endless run,
        whose prompts cannot all be fitted first (its length can differ by the nonce's tokens: usage says)."""
        _, _, rest = template.text.partition(" ")
        return Prompt(f"{make_nonce()} {rest}" if rest else make_nonce(), template.tokens, estimated=True)

    def _request(self, prompt: Prompt) -> StreamRequest:
        return StreamRequest(self.server.kind, self.server.model, prompt.text, self.workload.max_tokens, self.workload.chat,
                             prompt.tokens, prompt.estimated, self.workload.exact_length)
