"""The roofline's probe: a prefill-heavy request, then a batch of decodes, the server's /metrics read around and
during them (and, for a server on this host's GPU, NVML's DRAM bandwidth alongside).

A server with no traffic has no phase to place, so the probe makes one of each: a long prompt with one token
back (its time to first token is the prefill), then `concurrency` streams with short prompts and long answers
(their steps are decode at that batch). Nothing here is roofline math: the facts go back to the caller.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

from tui.core.hardware.decode_window import DecodeWindow, decode_window
from tui.core.measure.records import RequestTiming
from tui.core.telemetry.readings import GpuSample, ServerReading
from tui.sources.detect import WARM_UP_PATHS, ServerInfo
from tui.sources.errors import SourceError
from tui.sources.gpu import GpuSampler
from tui.sources.http import ServerClient
from tui.sources.workloads.load import LoadDial, LoadRunner, Workload
from tui.sources.meter import Meter
from tui.sources.workloads.prompts import prompt_of
from tui.sources.scrape import MetricsScraper
from tui.sources.stream import StreamRequest

TICK_S = 0.1
"""Readings of /metrics (and NVML) while the decodes run: GPM needs more than 100 ms between its samples."""
SETTLE_S = 0.5
"""How long a counter may lag the answer it counts (a server updates its metrics after it sends the chunk)."""
WARM_UP_PROMPT_TOKENS = 16


@dataclass(frozen=True, slots=True)
class PrefillRun:
    """One prompt's prefill: its timing, and the server's counters just before and after it."""

    timing: RequestTiming
    prompt_tokens: int
    cached_tokens: int
    prefill_s: float
    prefill_source: str
    """"server" (its own split of the request) or "client" (time to first token)."""
    before: ServerReading | None
    after: ServerReading | None


@dataclass(frozen=True, slots=True)
class DecodeRun:
    """`concurrency` streams decoding together: their timings, and the server's readings while they ran."""

    timings: tuple[RequestTiming, ...]
    concurrency: int
    prompt_tokens: int
    max_tokens: int
    readings: tuple[ServerReading, ...]
    """The reading before the streams went out, then one every TICK_S while they ran."""
    gpu_samples: tuple[GpuSample | None, ...]
    """NVML's sample taken with each reading (GPM's figures cover the time since the one before); empty without."""

    @property
    def window(self) -> DecodeWindow | None:
        return decode_window(self.readings)


async def warm_up_if_fresh(client: ServerClient, server: ServerInfo, meter: Meter, exact_length: bool) -> None:
    """A short request first on a server that has served nothing: its first pays the cold start, not the probe's."""
    scraper = MetricsScraper(client)
    reading = await _reading(scraper)
    if reading is not None and reading.counters.get("generation_tokens_total"):
        return
    prompt = await prompt_of(client, server.kind, server.model, WARM_UP_PROMPT_TOKENS)
    await meter.warm_up(WARM_UP_PATHS[server.kind])
    await meter.measure(StreamRequest(server.kind, server.model, prompt.text, 2, False, prompt.tokens, prompt.estimated,
                                      exact_length))


async def probe_prefill(client: ServerClient, server: ServerInfo, meter: Meter, prompt_tokens: int,
                        exact_length: bool) -> PrefillRun:
    """One request of `prompt_tokens` (a fresh prefix: nothing cached) and a single token back.

    Raises SourceError when the request fails, with the server's reason.
    """
    scraper = MetricsScraper(client)
    prompt = await prompt_of(client, server.kind, server.model, prompt_tokens)
    request = StreamRequest(server.kind, server.model, prompt.text, 1, False, prompt.tokens, prompt.estimated,
                            exact_length)
    connect_s = await meter.warm_up(WARM_UP_PATHS[server.kind])
    before = await _reading(scraper)
    timing = await meter.measure(request, connect_s)
    if not timing.ok or timing.ttft_s is None:
        raise SourceError(f"the prefill request failed: {timing.error or 'no token came back'}")
    counted = timing.prompt_tokens or prompt.tokens or prompt_tokens
    after = await _settled(scraper, before, counted) if before is not None else None
    split = timing.server_split
    server_s = split.prefill_s if split is not None and split.prefill_s else None
    cached = split.cached_tokens if split is not None and split.cached_tokens else 0
    return PrefillRun(timing, counted, cached, server_s or timing.ttft_s, "server" if server_s else "client",
                      before, after)


async def probe_decode(client: ServerClient, server: ServerInfo, meter: Meter, concurrency: int, prompt_tokens: int,
                       max_tokens: int, exact_length: bool, gpu: GpuSampler | None = None) -> DecodeRun:
    """`concurrency` streams sent at once, read every TICK_S until they end.

    Raises SourceError when the server cannot be reached before the first send; failed streams are in `timings`.
    """
    scraper = MetricsScraper(client)
    readings: list[ServerReading] = []
    samples: list[GpuSample | None] = []
    first = await _reading(scraper)
    if first is not None:
        readings.append(first)
        samples.append(await asyncio.to_thread(gpu.sample) if gpu is not None else None)
    runner = LoadRunner(client, server, Workload(prompt_tokens, max_tokens, num_prompts=concurrency,
                                                 exact_length=exact_length), LoadDial(math.inf, concurrency), meter)
    load = asyncio.create_task(runner.run())
    if first is not None:
        while not load.done():
            await asyncio.wait({load}, timeout=TICK_S)
            reading = await _reading(scraper)
            if reading is None:
                break
            readings.append(reading)
            samples.append(await asyncio.to_thread(gpu.sample) if gpu is not None else None)
    result = await load
    return DecodeRun(tuple(result.requests), concurrency, prompt_tokens, max_tokens, tuple(readings),
                     tuple(samples) if gpu is not None else ())


async def _reading(scraper: MetricsScraper) -> ServerReading | None:
    """One raw reading of /metrics; None where the server has none (or it cannot be read: the figures that need
    it are then missing, and say so)."""
    try:
        await scraper.read()
    except SourceError:
        return None
    return scraper.last_reading


async def _settled(scraper: MetricsScraper, before: ServerReading, prompt_tokens: int) -> ServerReading | None:
    """The reading after the request, once its prompt is counted (or SETTLE_S later: the caller sees it was not)."""
    waited = 0.0
    while True:
        after = await _reading(scraper)
        counted = _grew(before, after, "prompt_tokens_total")
        if after is None or counted is None or counted >= prompt_tokens or waited >= SETTLE_S:
            return after
        await asyncio.sleep(TICK_S)
        waited += TICK_S


def _grew(before: ServerReading, after: ServerReading | None, counter: str) -> float | None:
    if after is None or counter not in before.counters or counter not in after.counters:
        return None
    return after.counters[counter] - before.counters[counter]

