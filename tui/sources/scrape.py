"""Scrape a server's /metrics at an interval and yield canonical `MetricsSnapshot`s.

A `MetricsScraper` keeps the readings a window needs, so a caller that catches
`ServerUnavailable`, backs off and comes back keeps its baseline: the first scrape after the
server returns shows a `restart` with the config before and after.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import replace
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

import httpx

from tui.core.engines.known import metrics_hint
from tui.core.telemetry.metric_names import read_wanted, wanted_lines
from tui.core.telemetry.promstats import build_snapshot, restart_reasons
from tui.core.telemetry.readings import MetricsSnapshot, Restart, ServerReading
from tui.core.untrusted import one_line
from tui.sources.errors import ProtocolError, ServerRejected, from_httpx, redirected, rejected

T = TypeVar("T")


class MetricsNotExposed(ServerRejected):
    """The server has no Prometheus /metrics (Ollama; llama.cpp without --metrics; `metrics_hint`)."""


NO_METRICS_HINT = f"this server exposes no Prometheus metrics ({metrics_hint()})"


class _Forgotten(Exception):
    """`MetricsScraper.forget` was called while a read awaited an answer."""


class MetricsScraper:
    """Reads /metrics (and /v1/models for max_model_len) through one httpx client."""

    def __init__(self, client: httpx.AsyncClient, window_s: float | None = None, path: str = "/metrics") -> None:
        self.client = client
        self.path = path
        self.window_s = window_s
        """Rates and quantiles span at least this long (several scrapes); None: since the previous scrape."""
        self._history: deque[ServerReading] = deque()
        self._models_config: dict[str, str] | None = None
        self._parsed: tuple[str, dict[str, str] | None, ServerReading] | None = None
        """The last page parsed (its read lines, the models' config then) and what it read."""
        self._last: MetricsSnapshot | None = None
        self.generation = 0
        """How many times `forget` was called: a read that spans one is read again, and a snapshot read in an older
        generation than the scraper's now was read before the restart its caller made (the caller drops it)."""

    @property
    def last_reading(self) -> ServerReading | None:
        """The raw reading of the latest successful scrape (for `promstats.cached_prompt_tokens` around one request)."""
        return self._history[-1] if self._history else None

    @property
    def _url(self) -> str:
        return f"{self.client.base_url}{self.path}"

    def forget(self) -> None:
        """The server was restarted by whoever knows it (phasetop, with new flags): the readings so far are
        another process's, so the next one starts afresh (no rate across the restart, no second restart found
        from them: a server with no start time that had counted nothing yet restarts unseen by its counters)."""
        self._history.clear()
        self._models_config = self._parsed = self._last = None
        self.generation += 1

    async def read(self) -> MetricsSnapshot:
        """Scrape once: the snapshot with rates and quantiles since the baseline reading.

        Raises ServerUnavailable, ServerTimeout, MetricsNotExposed, ServerRejected or ProtocolError.
        """
        while True:
            try:
                return await self._read_in(self.generation)
            except _Forgotten:  # phasetop replaced the server while this read was on its way: read the new one afresh
                continue

    async def _read_in(self, generation: int) -> MetricsSnapshot:
        """One read, all of whose answers came in `generation`: what it keeps is changed only after the last of them."""
        text, stamps = await self._unless_forgotten(generation, self._read_text())
        previous = self._history[-1] if self._history else None
        if previous is not None and self._last is not None and stamps[1] == previous.t_unix:
            return self._last  # the same scrape again (read through Prometheus before its next one): nothing new
        if self._models_config is None:
            self._models_config = await self._unless_forgotten(generation, self._read_models_config())
        reading = self._parse(text, stamps)
        restart = None
        if previous is not None and (reasons := restart_reasons(previous, reading)):
            self._models_config = await self._unless_forgotten(generation, self._read_models_config())
            reading = self._parse(text, stamps)
            restart = Restart(reasons, dict(previous.engine_config), dict(reading.engine_config))
            self._history.clear()  # older readings belong to the previous process
        # After a restart previous only places the new process's start; build_snapshot takes no baseline from it.
        baseline = previous if restart else self._baseline(reading)
        self._history.append(reading)
        self._last = build_snapshot(baseline, reading, restart)
        return self._last

    async def _unless_forgotten(self, generation: int, answer: Awaitable[T]) -> T:
        """`answer`, unless `forget` was called while it was awaited: a page or config read then may be the replaced
        process's, and kept as the first reading after the restart it would make a second restart."""
        result = await answer
        if generation != self.generation:
            raise _Forgotten
        return result

    async def snapshots(self, interval_s: float, count: int | None = None) -> AsyncIterator[MetricsSnapshot]:
        """One snapshot every interval_s (count of them, or forever); the first has no window unless one was read before."""
        n = 0
        while count is None or n < count:
            started = time.monotonic()
            yield await self.read()
            n += 1
            if count is None or n < count:
                await asyncio.sleep(max(0.0, interval_s - (time.monotonic() - started)))

    def _parse(self, text: str, stamps: tuple[float, float]) -> ServerReading:
        """The page read; a page whose read lines are those of the last one (an idle server) is not parsed again."""
        wanted = wanted_lines(text)
        last = self._parsed
        if last is not None and last[0] == wanted and last[1] == self._models_config:
            return replace(last[2], t_mono=stamps[0], t_unix=stamps[1])
        try:
            reading = read_wanted(wanted, *stamps, self._models_config)
        except ValueError as error:
            # The parser quotes the server's bytes: one line, control characters shown, short.
            raise ProtocolError(f"{self._url}: not Prometheus text ({one_line(str(error), 120)})") from None
        self._parsed = (wanted, self._models_config, reading)
        return reading

    def _baseline(self, reading: ServerReading) -> ServerReading | None:
        """The newest reading at least window_s older than this one (else the oldest); keeps the history short."""
        if not self._history:
            return None
        if self.window_s is None:
            baseline = self._history[-1]
            self._history.clear()
            self._history.append(baseline)
            return baseline
        while len(self._history) > 1 and reading.t_mono - self._history[1].t_mono >= self.window_s:
            self._history.popleft()
        return self._history[0]

    async def _read_text(self) -> tuple[str, tuple[float, float]]:
        """The exposition text and when it was read (monotonic, unix): here, now."""
        return await self._get_metrics_text(), (time.monotonic(), time.time())

    async def _get_metrics_text(self) -> str:
        try:
            response = await self.client.get(self.path)
        except httpx.HTTPError as error:
            raise from_httpx(error, self._url) from None
        if response.is_redirect:
            raise redirected(response.status_code, self._url, response.headers.get("location"))
        if response.status_code == 404:
            raise MetricsNotExposed(f"{self._url}: HTTP 404, {NO_METRICS_HINT}", 404)
        if response.status_code >= 400:
            raise rejected(response.status_code, self._url, _short(response.text))
        if response.headers.get("content-type", "").startswith(("application/json", "text/html")):
            content_type = one_line(response.headers["content-type"], 80)
            raise MetricsNotExposed(f"{self._url}: answered {content_type}, {NO_METRICS_HINT}", 200)
        return response.text

    async def _read_models_config(self) -> dict[str, str]:
        """`max_model_len` from /v1/models (vLLM); empty where the server has no such endpoint."""
        try:
            response = await self.client.get("/v1/models")
            data = response.json().get("data") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return {}
        for model in data or []:
            if isinstance(model, dict) and model.get("max_model_len") is not None:
                return {"max_model_len": str(model["max_model_len"])}
        return {}


def _short(text: str, limit: int = 200) -> str:
    return one_line(text, limit)


async def snapshots(client: httpx.AsyncClient, interval_s: float, count: int | None = None) -> AsyncIterator[MetricsSnapshot]:
    """Snapshots of the server's /metrics every interval_s, each over the window since the one before."""
    async for snapshot in MetricsScraper(client).snapshots(interval_s, count):
        yield snapshot
