"""The main screen's workers: each loop reads one source and only posts messages.

No worker touches a widget; the screen's handlers turn messages into state.
"""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
from textual import work
from textual.worker import get_current_worker

from tui.app.messages import (
    GpuSampled,
    HostSampled,
    MetricsScraped,
    MetricsUnavailable,
    RequestCompleted,
    RequestStarted,
    ServerCameUp,
    ServerWentDown,
    TokensArrived,
)
from tui.sources.detect import WARM_UP_PATHS, describe_server, detect_api
from tui.sources.errors import SourceError
from tui.sources.gpu import GpuSampler
from tui.sources.host import HostSampler, local_port
from tui.sources.prompts import prompt_of
from tui.sources.scrape import MetricsNotExposed, MetricsScraper
from tui.sources.http import make_client
from tui.sources.stream import ChunkArrived, RequestFinished, StreamRequest, stream, warm_up

TOKEN_BATCH_S = 0.05
"""Token arrivals are posted in batches this far apart: about 20 timeline updates a second at most."""
BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)
"""Waits between reconnection attempts; the last repeats."""


def backoff(attempt: int) -> float:
    return BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]


class FeedsMixin:
    """Workers of `MainScreen`. Needs `self.client`, `self.settings`, `self.server_url`."""

    client: httpx.AsyncClient
    api: str | None
    model: str | None

    @work(exclusive=True, group="server", exit_on_error=False)
    async def find_server(self) -> None:
        """Detect the API and model, retrying with backoff until the server answers."""
        attempt = 0
        while True:
            try:
                api = self.settings.api if self.settings.api != "auto" else await detect_api(self.client)
                info = await describe_server(self.client, api, self.settings.model)
            except SourceError as error:
                self.post_message(ServerWentDown(time.time(), str(error)))
                await asyncio.sleep(backoff(attempt))
                attempt += 1
                continue
            self.post_message(ServerCameUp(api, info.model, info.max_model_len, info.version))
            return

    @work(group="requests", thread=True, exit_on_error=False)
    def send_requests(self, first_id: int, label: str, text: str | None, prompt_tokens: int | None,
                      concurrency: int, max_tokens: int, shared_prefix: str | None = None) -> None:
        """Send `concurrency` requests at once, on an event loop of their own in this thread.

        The UI's loop renders; if the reading loop shared it, a repaint would sit between a chunk's
        arrival and its timestamp. Here nothing does.
        """
        api, model = self.api, self.model
        if api is None or model is None:
            self.app.call_from_thread(self.notify, "the server is not known yet: wait for the header to say it is up",
                                      severity="warning")
            return
        asyncio.run(self._send_all(api, model, first_id, label, text, prompt_tokens, concurrency, max_tokens, shared_prefix))

    async def _send_all(self, api: str, model: str, first_id: int, label: str, text: str | None,
                        prompt_tokens: int | None, concurrency: int, max_tokens: int, shared_prefix: str | None) -> None:
        async with make_client(self.server_url, self.settings.api_key, self.settings.timeout_s) as client:
            try:
                connect_s = await warm_up(client, WARM_UP_PATHS[api], concurrency)
            except SourceError as error:
                self.app.call_from_thread(self.notify, str(error), title="not sent", severity="error", markup=False)
                return
            jobs = []
            for n in range(concurrency):
                if text is not None:
                    body, tokens, estimated = text, None, True
                else:
                    prompt = await prompt_of(client, api, model, prompt_tokens or 200)
                    body, tokens, estimated = prompt.text, prompt.tokens, prompt.estimated
                    if shared_prefix:
                        body = shared_prefix + "\n" + body
                request = StreamRequest(api=api, model=model, prompt=body, max_tokens=max_tokens,
                                        prompt_tokens=tokens, prompt_tokens_estimated=estimated)
                lane = label if concurrency == 1 else f"{label} {n + 1}"
                jobs.append(self._stream_one(client, first_id + n, lane, request, connect_s))
            await asyncio.gather(*jobs)

    async def _stream_one(self, client: httpx.AsyncClient, request_id: int, label: str, request: StreamRequest,
                          connect_s: float | None) -> None:
        self.post_message(RequestStarted(request_id, label, time.time(), request.prompt_tokens))
        offsets: list[float] = []
        texts: list[str] = []
        last_post = time.monotonic()
        async for event in stream(client, request, connect_s):
            if isinstance(event, ChunkArrived):
                offsets.append(event.offset_s)
                texts.append(event.text)
                if time.monotonic() - last_post >= TOKEN_BATCH_S:
                    self.post_message(TokensArrived(request_id, tuple(offsets), "".join(texts)))
                    offsets, texts, last_post = [], [], time.monotonic()
            elif isinstance(event, RequestFinished):
                if texts:
                    self.post_message(TokensArrived(request_id, tuple(offsets), "".join(texts)))
                self.post_message(RequestCompleted(request_id, event.timing))

    @work(exclusive=True, group="metrics", exit_on_error=False)
    async def poll_metrics(self) -> None:
        """Scrape /metrics every interval; a server that goes away is retried with backoff."""
        interval = self.settings.poll.metrics_interval_s
        scraper = MetricsScraper(self.client)
        attempt = 0
        while True:
            try:
                self.post_message(MetricsScraped(await scraper.read()))
                attempt = 0
                await asyncio.sleep(interval)
            except MetricsNotExposed as error:
                self.post_message(MetricsUnavailable(str(error)))
                return
            except SourceError as error:
                self.post_message(ServerWentDown(time.time(), str(error)))
                await asyncio.sleep(backoff(attempt))
                attempt += 1

    @work(exclusive=True, group="gpu", thread=True, exit_on_error=False)
    def poll_gpu(self) -> None:
        """NVML and psutil in a thread: their calls block. Stops when the worker is cancelled."""
        worker = get_current_worker()
        cancelled: threading.Event = worker.cancelled_event
        port = local_port(self.server_url)
        host = HostSampler(port)
        with GpuSampler(server_port=port) as gpu:
            while not cancelled.is_set():
                self.post_message(GpuSampled(gpu.sample()))
                self.post_message(HostSampled(host.sample()))
                cancelled.wait(self.settings.poll.gpu_interval_s)
