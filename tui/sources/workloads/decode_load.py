"""The GPU check's decode load: a few endless streams on a server the user named, phasetop's own load runner.

The GPU is sampled while decode is under way; the server's token counter is read just before and just after, so
the tokens a second span the very window NVML measured. Short prompts and long answers keep prefill rare.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import TypeVar

from tui.core.hardware.gpu_check import DecodeRun
from tui.core.measure.records import RequestTiming
from tui.core.telemetry.readings import MetricsSnapshot
from tui.core.untrusted import one_line, without_credentials
from tui.sources.detect import ServerInfo
from tui.sources.errors import SourceError
from tui.sources.http import ServerClient
from tui.sources.identity import simulator_flags
from tui.sources.workloads.load import LoadDial, LoadResult, LoadRunner, Workload
from tui.sources.scrape import MetricsNotExposed, MetricsScraper
from tui.sources.stream import StreamRequest

T = TypeVar("T")

SETTLE_S = 1.0
"""Once every stream is sent, this long for their prefills to pass, so the windows see decode."""
STREAMING_TIMEOUT_S = 60.0
"""Longest wait for the streams to be sent (prompts are fitted with the server's /tokenize first)."""


@dataclass(frozen=True, slots=True)
class DecodePlan:
    """What the decode load sends: `streams` requests at once, each a fresh short prompt and a long answer."""

    streams: int
    prompt_tokens: int
    max_tokens: int


async def decode_during(client: ServerClient, server: ServerInfo, plan: DecodePlan, sample: Callable[[], T],
                        settle_s: float = SETTLE_S) -> tuple[T, DecodeRun]:
    """Run `sample` (blocking: NVML, in a thread) while `plan` decodes on the server; its result and the decode's.

    Raises SourceError when the load cannot start or the server goes away while it runs.
    """
    simulated = await simulator_flags(client) is not None
    workload = Workload(plan.prompt_tokens, plan.max_tokens, backlog=0)  # no arrivals pile up behind the streams
    runner = LoadRunner(client, server, workload, LoadDial(math.inf, plan.streams))
    failures: list[str] = []

    def finished(_request: StreamRequest, timing: RequestTiming) -> None:
        if not timing.ok:
            failures.append(timing.error or "failed")

    running = asyncio.create_task(runner.run(on_finished=finished))
    try:
        await _streaming(runner, running, plan.streams)
        await asyncio.sleep(settle_s)
        scraper: MetricsScraper | None = MetricsScraper(client)
        note = None
        try:
            await scraper.read()
        except MetricsNotExposed as error:
            scraper, note = None, str(error)
        started = time.monotonic()
        sampled = await asyncio.to_thread(sample)
        seconds = time.monotonic() - started
        snapshot = await scraper.read() if scraper is not None else None
        if running.done():
            _raise_aborted(running.result())
    finally:
        runner.stop()
        running.cancel()
        with suppress(asyncio.CancelledError, SourceError):
            await running
    if failures:
        failed = f"{len(failures)} requests failed, the first: {one_line(failures[0], 160)}"
        note = f"{note}; {failed}" if note else failed
    return sampled, _decode_run(server, plan, seconds, snapshot, simulated, note)


async def _streaming(runner: LoadRunner, running: asyncio.Task, streams: int) -> None:
    """Until every stream is in flight; the runner's own error if it stops first."""
    deadline = time.monotonic() + STREAMING_TIMEOUT_S
    while runner.progress().in_flight < streams:
        if running.done():
            _raise_aborted(running.result())  # raises the runner's SourceError, if it had one
            raise SourceError("the load ended before its streams were sent")
        if time.monotonic() > deadline:
            raise SourceError(f"the server did not take {streams} streams within {STREAMING_TIMEOUT_S:.0f} s")
        await asyncio.sleep(0.05)


def _raise_aborted(result: LoadResult) -> None:
    if result.aborted:
        raise SourceError(result.aborted)


def _decode_run(server: ServerInfo, plan: DecodePlan, seconds: float, snapshot: MetricsSnapshot | None,
                simulated: bool, note: str | None) -> DecodeRun:
    tok_s = snapshot.generation_tok_s if snapshot is not None else None
    if snapshot is not None and tok_s is None:
        note = note or "the server's generation counter gave no rate over the window"
    return DecodeRun(url=without_credentials(server.url), model=server.model, streams=plan.streams,
                     prompt_tokens=plan.prompt_tokens, max_tokens=plan.max_tokens, seconds=seconds, decode_tok_s=tok_s,
                     est_read_gbs=snapshot.est_read_gbs if snapshot is not None else None, simulated=simulated,
                     note=note)
