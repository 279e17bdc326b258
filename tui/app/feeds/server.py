"""Finding the server (its API and model) and scraping its /metrics, each retried with backoff while it is away."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx
from textual.message import Message

from tui.app.messages import MetricsScraped, MetricsUnavailable, ServerCameUp, ServerWentDown
from tui.config import Settings
from tui.sources import reach
from tui.sources.detect import describe_configured
from tui.sources.errors import SourceError
from tui.sources.identity import server_is_fresh
from tui.sources.scrape import MetricsNotExposed, MetricsScraper

Post = Callable[[Message], object]

BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)
"""Waits between full attempts at a server nothing listens for; the last repeats. Probes in between see it
come back sooner."""
PROBE_EVERY_S = 0.5
"""While nothing listens, a TCP connect probe this often (about 0.25 ms of CPU each, refused): the UI is live again
within about this long of the server being ready, however long it was down."""
LISTENING_RETRY_S = 1.0
"""The longest wait before asking again a server that listens but failed (an error status, a bad answer):
once a second is the metrics poll's own default rate, so it costs the server nothing more."""


def backoff(attempt: int) -> float:
    return BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]


async def wait_to_retry(url: str, attempt: int) -> None:
    """Wait before trying a failed server again: its backoff while nothing listens, cut short as soon as a
    probe connects; at most `LISTENING_RETRY_S` when it listens (the failure was its answer, not its absence)."""
    wait_s = backoff(attempt)
    if await reach.accepts(url):
        await asyncio.sleep(min(wait_s, LISTENING_RETRY_S))
        return
    deadline = time.monotonic() + wait_s
    while (left_s := deadline - time.monotonic()) > 0:
        await asyncio.sleep(min(PROBE_EVERY_S, left_s))
        if await reach.accepts(url):
            return


async def find_server(client: httpx.AsyncClient, settings: Settings, url: str, post: Post) -> None:
    """Detect the API and model, retrying with backoff until the server answers."""
    attempt = 0
    while True:
        try:
            info = await describe_configured(client, settings.api, settings.model)
        except SourceError as error:
            post(ServerWentDown(time.time(), str(error)))
            await wait_to_retry(url, attempt)
            attempt += 1
            continue
        fresh = await server_is_fresh(client)
        post(ServerCameUp(info.kind, info.model, info.max_model_len, info.version, info.model_bytes, fresh))
        return


async def poll_metrics(scraper: MetricsScraper, settings: Settings, url: str, post: Post) -> None:
    """Read the metrics through `scraper` every interval; a server that goes away is retried with backoff."""
    interval = settings.poll.metrics_interval_s
    attempt = 0
    while True:
        try:
            snapshot = await scraper.read()
            post(MetricsScraped(snapshot, scraper.generation))
            attempt = 0
            await asyncio.sleep(interval)
        except MetricsNotExposed as error:
            post(MetricsUnavailable(str(error)))
            return
        except SourceError as error:
            post(ServerWentDown(time.time(), str(error)))
            await wait_to_retry(url, attempt)
            attempt += 1
