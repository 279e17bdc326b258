"""Experiment drivers: each runs one of the domain text's experiments against a live server.

    plan = make_plan("prompt-tokens")                       # tui.core.experiments.plans
    async with make_client(url) as client:
        result = await run_experiment(client, server, plan, on_progress)
    result.finding    # "TTFT ×9.6 from 200 to 2,000 tokens (6.9 → 66 ms); decode −2.1 %"

Every request is timed by a meter (`tui.sources.meter`: in this process by default), prompts come from
`prompts.prompt_of`; rows and findings are built by `tui.core.experiments.plans`. Progress goes to a
plain callback, called on the event loop, so a UI worker can post it as a message and the CLI can
print it; nothing here knows about Textual.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import httpx

from tui.core.measure.delivery import Guard
from tui.core.experiments.findings import finding, finding_figures
from tui.core.experiments.columns import describe_row
from tui.core.experiments.plans import BACKGROUND_PROMPT_TOKENS, CONTEXT_PROMPT_TOKENS, INTERFERENCE_LEAD_TOKENS, INTERFERENCE_STREAMS, PREFIX_TAIL_WORDS, Plan
from tui.core.experiments.rows import concurrency_row, context_rows, interference_row, prefix_row, prompt_length_row
from tui.core.measure.records import RequestTiming
from tui.sources.detect import WARM_UP_PATHS, ServerInfo
from tui.sources.errors import SourceError
from tui.sources.workloads.prompts import Prompt, estimate_tokens, filler_text, make_nonce, prompt_of
from tui.sources.meter import ChunksArrived, LocalMeter, Meter
from tui.sources.stream import RequestFinished, StreamRequest

WARM_PROMPT_TOKENS = 20
CONTEXT_PROGRESS_TOKENS = 500
"""The context experiment reports progress every this many generated tokens."""


@dataclass(frozen=True, slots=True)
class Progress:
    """How far an experiment has got: one line for a person, the share done, and a row when one just finished."""

    vary: str
    message: str
    """Plain text, e.g. "2,000-token prompt, 2 of 3: TTFT 66.1 ms"."""
    fraction: float
    """0 to 1: the share of the experiment's requests (context: tokens) done."""
    row: dict | None = None
    """Set when a value's row is complete (the same dict that ends up in `ExperimentResult.rows`)."""


ProgressCallback = Callable[[Progress], None]


@dataclass(frozen=True, slots=True)
class ExperimentResult:
    """A finished experiment: its plan, one row per value, the one-line finding, and every timed request."""

    plan: Plan
    rows: tuple[dict, ...]
    finding: str
    requests: tuple[RequestTiming, ...]
    """Every timed request, in order (the raw timings a run file keeps). Interference keeps each round
    as its running streams then the long prompt, so `tui.core.view.timeline.lanes(requests[-9:])` draws
    the last round, the long prompt's prefill span below the streams' gap."""

    def to_json(self) -> dict:
        return {"vary": self.plan.vary, "rows": list(self.rows), "finding": self.finding,
                "finding_figures": finding_figures(self.plan.vary, self.rows, self.plan.slos), "scaled": list(self.plan.scaled)}


class ExperimentFailed(SourceError):
    """A request failed mid-experiment; `str()` is one line, `partial` holds what was measured before it."""

    def __init__(self, message: str, partial: ExperimentResult) -> None:
        super().__init__(message)
        self.partial = partial


async def run_experiment(
    client: httpx.AsyncClient,
    server: ServerInfo,
    plan: Plan,
    on_progress: ProgressCallback | None = None,
    should_stop: Callable[[], bool] | None = None,
    guard: Guard = Guard(),
    exact_length: bool = True,
    meter: Meter | None = None,
) -> ExperimentResult:
    """Run `plan` against the server behind `client` (see `tui.core.experiments.plans.make_plan`).

    `server` is `detect.describe_server`'s answer. The client must pool at least as many connections
    as the plan runs streams at once (`http.make_client` pools 256). Raises `ExperimentFailed` when
    a request fails, and `SourceError` when the server cannot be reached at all. When `should_stop()`
    turns true (a first Ctrl-C), the experiment ends after the row under way with `ExperimentFailed`
    ("interrupted") holding every row finished. Requests timed in bursts (faster than the server, or than the
    `guard`'s ceiling, or clumped: `tui.core.measure.delivery`) are kept, flagged, and left out of the rows. `meter` times
    them (default: a `LocalMeter` over `client`).
    """
    run = _Run(client, meter or LocalMeter(client), server, plan, on_progress, should_stop, guard, exact_length)
    try:
        await run.warm()
        rows = await DRIVERS[plan.vary](run)
    except _CutShort as failure:
        raise ExperimentFailed(str(failure), run.result(run.rows)) from None
    return run.result(rows)


class _CutShort(Exception):
    """The experiment ends early (a request failed, or a stop was asked for); its rows so far stand."""


class _Run:
    """One experiment in progress: the client, the timings so far, the rows so far, and progress."""

    def __init__(self, client: httpx.AsyncClient, meter: Meter, server: ServerInfo, plan: Plan,
                 on_progress: ProgressCallback | None, should_stop: Callable[[], bool] | None = None,
                 guard: Guard = Guard(), exact_length: bool = True) -> None:
        self.client = client
        self.meter = meter
        self.guard = guard
        self.exact_length = exact_length
        self.server = server
        self.plan = plan
        self.on_progress = on_progress
        self.should_stop = should_stop
        self.requests: list[RequestTiming] = []
        self.rows: list[dict] = []
        self.done = 0
        self.total = 1

    async def warm(self) -> None:
        """Open a connection, then send one throwaway request: the first one pays code warm-up on both sides."""
        await self.meter.warm_up(WARM_UP_PATHS[self.server.kind])
        timing = await self.meter.measure(self.request(await self.prompt(WARM_PROMPT_TOKENS), 4))
        if not timing.ok:
            raise _CutShort(f"warm-up request failed: {timing.error}")

    async def prompt(self, tokens: int) -> Prompt:
        return await prompt_of(self.client, self.server.kind, self.server.model, tokens)

    def request(self, prompt: Prompt, max_tokens: int) -> StreamRequest:
        return StreamRequest(self.server.kind, self.server.model, prompt.text, max_tokens, False, prompt.tokens, prompt.estimated,
                             self.exact_length)

    def record(self, timings: Sequence[RequestTiming], what: str) -> list[RequestTiming]:
        """Keep the timings, those that came in bursts flagged (rows leave them out); the first failure ends
        the experiment."""
        flagged = self.guard.flagged(timings)
        self.requests.extend(flagged)
        for timing in flagged:
            if not timing.ok:
                raise _CutShort(f"{what} failed: {timing.error}")
        return flagged

    async def measure(self, prompt: Prompt, max_tokens: int, what: str) -> RequestTiming:
        [timing] = self.record([await self.meter.measure(self.request(prompt, max_tokens))], what)
        return timing

    def step(self, message: str, units: int = 1) -> None:
        self.done += units
        self._emit(message, None)

    def add_row(self, row: dict) -> None:
        self.rows.append(row)
        self._emit(describe_row(self.plan.vary, row), row)
        if self.should_stop is not None and self.should_stop():
            raise _CutShort("interrupted")

    def result(self, rows: Sequence[dict]) -> ExperimentResult:
        bursts = sum(1 for t in self.requests if t.burst)
        return ExperimentResult(self.plan, tuple(rows), finding(self.plan.vary, rows, bursts), tuple(self.requests))

    def _emit(self, message: str, row: dict | None) -> None:
        if self.on_progress is not None:
            self.on_progress(Progress(self.plan.vary, message, min(1.0, self.done / self.total), row))


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


async def _prompt_length(run: _Run) -> list[dict]:
    """Prompts of each length, `repeat` times each, one at a time: TTFT climbs, decode stays."""
    plan = run.plan
    run.total = len(plan.values) * plan.repeat
    for tokens in plan.values:
        timings = []
        for index in range(plan.repeat):
            what = f"{tokens:,}-token prompt, {index + 1} of {plan.repeat}"
            timing = await run.measure(await run.prompt(tokens), plan.max_tokens, what)
            timings.append(timing)
            run.step(f"{what}: TTFT {_ms(timing.ttft_s)}")
        run.add_row(prompt_length_row(tokens, timings))
    return run.rows


def _with_tail(prompt: Prompt) -> Prompt:
    """The prompt plus a short unique question: a shared system prompt, then the user's own words."""
    tail = " " + filler_text(make_nonce(), PREFIX_TAIL_WORDS)
    return Prompt(prompt.text + tail, prompt.tokens + estimate_tokens(tail), estimated=True)


async def _prefix(run: _Run) -> list[dict]:
    """A unique prompt, then one shared prefix sent twice (each with its own tail): the second TTFT drops on a cache hit.

    Each repeat draws a new shared prefix, so its first send is always a miss.
    """
    plan = run.plan
    run.total = len(plan.values) * plan.repeat
    for tokens in plan.values:
        unique, first, second = [], [], []
        for index in range(plan.repeat):
            what = f"{tokens:,}-token prefix, {index + 1} of {plan.repeat}"
            unique.append(await run.measure(_with_tail(await run.prompt(tokens)), plan.max_tokens, f"{what}, unique prompt"))
            shared = await run.prompt(tokens)
            first.append(await run.measure(_with_tail(shared), plan.max_tokens, f"{what}, first send"))
            second.append(await run.measure(_with_tail(shared), plan.max_tokens, f"{what}, second send"))
            run.step(f"{what}: unique {_ms(unique[-1].ttft_s)}, first {_ms(first[-1].ttft_s)}, second {_ms(second[-1].ttft_s)}")
        run.add_row(prefix_row(tokens, unique, first, second))
    return run.rows


async def _concurrency(run: _Run) -> list[dict]:
    """N streams started together, for each N: aggregate tok/s climbs, ITL much less."""
    plan = run.plan
    run.total = len(plan.values) * plan.repeat
    for streams in plan.values:
        await run.meter.warm_up(WARM_UP_PATHS[run.server.kind], streams)
        rounds = []
        for index in range(plan.repeat):
            prompts = await asyncio.gather(*(run.prompt(BACKGROUND_PROMPT_TOKENS) for _ in range(streams)))
            batch = await asyncio.gather(*(run.meter.measure(run.request(p, plan.max_tokens)) for p in prompts))
            what = f"{streams} stream{'s' if streams != 1 else ''}, round {index + 1} of {plan.repeat}"
            batch = run.record(batch, what)
            rounds.append(batch)
            run.step(f"{what} done")
        run.add_row(concurrency_row(streams, rounds))
    return run.rows


async def _follow(run: _Run, request: StreamRequest, counts: list[int], index: int, lead: asyncio.Event) -> RequestTiming:
    """Stream one running request, counting its tokens; `lead` is set once every stream has its lead (or one ended)."""
    try:
        async with aclosing(run.meter.stream(request)) as events:
            async for event in events:
                if isinstance(event, ChunksArrived):
                    counts[index] += event.tokens
                    if counts[index] >= INTERFERENCE_LEAD_TOKENS and min(counts) >= INTERFERENCE_LEAD_TOKENS:
                        lead.set()
                elif isinstance(event, RequestFinished):
                    return event.timing
        raise AssertionError("a meter's stream always ends with RequestFinished")
    finally:
        lead.set()  # a stream that ended before the lead must not leave the long prompt waiting


async def _interference(run: _Run) -> list[dict]:
    """Streams decoding; once each has its lead, a long prompt lands among them: their gaps before, during, after its prefill."""
    plan = run.plan
    run.total = len(plan.values) * plan.repeat
    await run.meter.warm_up(WARM_UP_PATHS[run.server.kind], INTERFERENCE_STREAMS + 1)
    for tokens in plan.values:
        rounds = []
        for index in range(plan.repeat):
            what = f"{tokens:,}-token prompt among {INTERFERENCE_STREAMS} streams, {index + 1} of {plan.repeat}"
            prompts = await asyncio.gather(*(run.prompt(BACKGROUND_PROMPT_TOKENS) for _ in range(INTERFERENCE_STREAMS)))
            long_prompt = await run.prompt(tokens)
            counts = [0] * INTERFERENCE_STREAMS
            lead = asyncio.Event()
            running = [
                asyncio.create_task(_follow(run, run.request(p, plan.max_tokens), counts, i, lead))
                for i, p in enumerate(prompts)
            ]
            try:
                await lead.wait()
                if any(task.done() for task in running):  # a stream ended before the long prompt could land
                    run.record(await asyncio.gather(*running), f"{what}: a running stream")
                    raise _CutShort(f"{what}: a running stream ended before its {INTERFERENCE_LEAD_TOKENS}th token")
                intruder = await run.meter.measure(run.request(long_prompt, 1))
                background = await asyncio.gather(*running)
            finally:  # cancelled (the UI stopped the experiment): stop the streams too
                for task in running:
                    task.cancel()
            *background, intruder = run.record([*background, intruder], what)
            rounds.append((background, intruder))
            run.step(f"{what}: its TTFT {_ms(intruder.ttft_s)}")
        run.add_row(interference_row(tokens, rounds))
    return run.rows


async def _context(run: _Run) -> list[dict]:
    """One long generation from a short prompt, `repeat` times: ITL at each token position."""
    plan = run.plan
    run.total = plan.repeat * plan.max_tokens
    generations = []
    prompt_tokens = CONTEXT_PROMPT_TOKENS
    for index in range(plan.repeat):
        what = f"generation {index + 1} of {plan.repeat}"
        prompt = await run.prompt(CONTEXT_PROMPT_TOKENS)
        timing = None
        generated = reported = 0
        async with aclosing(run.meter.stream(run.request(prompt, plan.max_tokens))) as events:
            async for event in events:
                if isinstance(event, ChunksArrived):
                    generated += event.tokens
                    while generated - reported >= CONTEXT_PROGRESS_TOKENS:
                        reported += CONTEXT_PROGRESS_TOKENS
                        run.step(f"{what}: token {prompt.tokens + reported:,} of {plan.values[-1]:,}", CONTEXT_PROGRESS_TOKENS)
                elif isinstance(event, RequestFinished):
                    timing = event.timing
        assert timing is not None
        [timing] = run.record([timing], what)
        generations.append(timing)
        prompt_tokens = timing.prompt_tokens or prompt.tokens
    run.done = run.total
    for row in context_rows(plan.values, generations, prompt_tokens):
        run.add_row(row)
    return run.rows


DRIVERS: dict[str, Callable[[_Run], Awaitable[list[dict]]]] = {
    "prompt-tokens": _prompt_length,
    "prefix": _prefix,
    "concurrency": _concurrency,
    "interference": _interference,
    "context": _context,
}
"""One driver per `--vary` name; each returns the rows (also passed to the progress callback as they finish)."""
