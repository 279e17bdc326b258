"""phasetop probe's workload: R streamed requests one after another, each on a connection of its own opened (and
timed) before the clock starts, with the server's cache-hit counters read around each where its reply has no count."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tui.config import Settings
from tui.core.measure.delivery import Guard
from tui.core.measure.records import RequestTiming, with_cached_from_metrics
from tui.core.telemetry.promstats import cached_prompt_tokens
from tui.core.telemetry.readings import ServerReading
from tui.sources.detect import WARM_UP_PATHS, ServerInfo
from tui.sources.errors import SourceError
from tui.sources.guard import with_speculation
from tui.sources.http import ServerClient, client_for
from tui.sources.meter import Meter
from tui.sources.scrape import MetricsScraper
from tui.sources.stream import StreamRequest
from tui.sources.workloads.prompts import estimate_tokens, prompt_of


@dataclass(frozen=True, slots=True)
class ProbeParams:
    """What shapes a probe: the prompt (as given, or generated to `prompt_tokens`), the tokens to generate, how many
    requests, and the endpoint."""

    prompt: str | None
    prompt_tokens: int
    max_tokens: int
    repeat: int = 1
    chat: bool = False

    def to_json(self) -> dict[str, Any]:
        """The workload, for the saved run (never the key, never settings wholesale)."""
        return {"prompt": self.prompt, "prompt_tokens": None if self.prompt is not None else self.prompt_tokens,
                "max_tokens": self.max_tokens, "repeat": self.repeat, "chat": self.chat}


@dataclass(frozen=True, slots=True)
class Probed:
    """The requests as timed (not yet judged), why the probe stopped short (None when all ran), and the guard after
    it (a speculating server's tokens a step read from its /metrics)."""

    requests: list[RequestTiming]
    failure: str | None
    guard: Guard


async def run_probe(settings: Settings, server: ServerInfo, guard: Guard, params: ProbeParams,
                    meter_for: Callable[[ServerClient], Meter],
                    on_request: Callable[[int, StreamRequest], None] | None = None) -> Probed:
    """Run the requests; the first failure stops the probe and is returned as one line. `on_request(index,
    request)`: each request as built, before it is sent (the CLI says where the tokenizer gave another length)."""
    timings: list[RequestTiming] = []
    async with client_for(settings, server.url) as metrics_client:
        counters = CacheCounters(metrics_client) if server.kind != "ollama" else None
        for index in range(params.repeat):
            where = f"request {index + 1} of {params.repeat}"
            # A fresh client per request: its connection is opened (and timed) by the warm-up, not inside TTFT.
            async with client_for(settings, server.url) as client:
                meter = meter_for(client)
                try:
                    connect_s = await meter.warm_up(WARM_UP_PATHS[server.kind])
                    request = await probe_request(client, server, params, settings.exact_length)
                except SourceError as error:
                    return Probed(timings, f"{where}: {error}", guard)
                if on_request is not None:
                    on_request(index, request)
                if counters:
                    await counters.before_request()
                timing = await meter.measure(request, connect_s)
            if counters:
                timing = with_cached_from_metrics(timing, await counters.cached_by_last_request())
            timings.append(timing)
            if not timing.ok:
                return Probed(timings, f"{where} failed: {timing.error}", guard)
        return Probed(timings, None, await with_speculation(guard, metrics_client))


async def probe_request(client: ServerClient, server: ServerInfo, params: ProbeParams,
                        exact_length: bool) -> StreamRequest:
    """The probe's request: its prompt as given, or generated to its length (exact where the server tokenizes)."""
    if params.prompt is not None:
        text, tokens, estimated = params.prompt, None, False
    else:
        prompt = await prompt_of(client, server.kind, server.model, params.prompt_tokens)
        text, tokens, estimated = prompt.text, prompt.tokens, prompt.estimated
    if tokens is None:
        tokens, estimated = estimate_tokens(text), True
    return StreamRequest(server.kind, server.model, text, params.max_tokens, params.chat, tokens, estimated,
                         exact_length)


class CacheCounters:
    """The server's cache-hit counters read around each request: its cached prompt tokens where the reply has
    no count of its own (vLLM without --enable-prompt-tokens-details). Requests run one at a time, so the
    growth is that request's, and the reading after one is the reading before the next (one scrape a
    request); a server with no /metrics gives None. Once a read failed none is tried again: a /metrics that
    drips or floods would cost a deadline per request."""

    def __init__(self, client: ServerClient) -> None:
        self._scraper = MetricsScraper(client)
        self._last: ServerReading | None = None
        self._failed = False

    async def before_request(self) -> None:
        if self._last is None:
            self._last = await self._reading()

    async def cached_by_last_request(self) -> int | None:
        before, self._last = self._last, await self._reading()
        return cached_prompt_tokens(before, self._last) if before is not None and self._last is not None else None

    async def _reading(self) -> ServerReading | None:
        if self._failed:
            return None
        try:
            await self._scraper.read()
        except SourceError:
            self._failed = True
            return None
        return self._scraper.last_reading
