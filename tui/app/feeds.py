"""The main screen's workers: each loop reads one source and only posts messages.

No worker touches a widget; the screen's handlers turn messages into state.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Collection

import httpx
import psutil
from textual import work
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.worker import get_current_worker

from tui.app.messages import (
    GpuSampled,
    HostSampled,
    MetricsScraped,
    MetricsUnavailable,
    ClientSampled,
    LaneTokens,
    RequestCompleted,
    RequestStarted,
    ServerCameUp,
    ServerWentDown,
    SimulatorExited,
    SimulatorRestarted,
    TokenBatch,
)
from tui.app.widgets.gpu_pane import GpuPane
from tui.app.widgets.timeline_pane import KEEP_LANES
from tui.core.client_load import ClientLoad
from tui.core.records import mark_cold
from tui.core.untrusted import one_line
from tui.sources import loop, reach
from tui.sources.detect import WARM_UP_PATHS, describe_server, detect_api
from tui.sources.errors import SourceError
from tui.sources.gpu import GpuSampler
from tui.sources.host import HostSampler, local_port
from tui.sources.identity import server_is_fresh
from tui.sources.prompts import prompt_of
from tui.sources.scrape import MetricsNotExposed, MetricsScraper
from tui.sources.http import client_for
from tui.sources.stream import ChunkArrived, RequestFinished, StreamRequest, stream, warm_up
from tui.sim.launcher import SimulatorError, SimulatorProcess

TOKEN_BATCH_S = 0.05
"""Token arrivals are posted in batches this far apart: about 20 timeline updates a second at most."""
SHOWN_LANES = KEEP_LANES
"""Lanes the timeline can show: of each send, this many newest get every offset posted."""
BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)
"""Waits between full attempts at a server nothing listens for; the last repeats. Probes in between see it
come back sooner."""
PROBE_EVERY_S = 0.5
"""While nothing listens, a TCP connect probe this often (about 0.25 ms of CPU each, refused): the UI is live again
within about this long of the server being ready, however long it was down."""
LISTENING_RETRY_S = 1.0
"""The longest wait before asking again a server that listens but failed (an error status, a bad answer):
once a second is the metrics poll's own default rate, so it costs the server nothing more."""


SIMULATOR_BINDINGS = [
    Binding("R", "restart_simulator", "Restart simulator", show=False, id="simulator.restart",
            tooltip="Start the simulator phasetop started again, on the same port (once it has exited)"),
]
"""Listed in the help screen while phasetop runs a simulator, usable once it exited (the toast and the GPU/host
pane then name the key); off the footer, which has no room to spare."""


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


class TokenBatches:
    """Chunks read since the last post, per request, posted as one `TokenBatch` of per-lane aggregates.

    One post for all the streams of a send keeps the screen near 20 updates a second however many
    streams run (32 streams posting on clocks of their own would ask for 640), and the aggregates keep
    the screen from walking every token: each offset only for the lanes the timeline can show (`detailed`),
    the text only for the one whose answer the prompt pane shows (`texted`); every other lane is a count
    and its first and last offsets. Each request's exact record still comes with its `RequestCompleted`.
    """

    def __init__(self, post: Callable[[Message], object], detailed: Collection[int] | None = None,
                 texted: int | None = None) -> None:
        self._post = post
        self._detailed = detailed
        """Requests whose every offset is posted; None: all."""
        self._texted = texted
        """The request whose text is posted; None: all."""
        self._pending: dict[int, tuple[list[float], list[str]]] = {}

    def add(self, request_id: int, offset_s: float, text: str) -> None:
        pending = self._pending.get(request_id)
        if pending is None:
            pending = self._pending[request_id] = ([], [])
        pending[0].append(offset_s)
        if text and (self._texted is None or request_id == self._texted):
            pending[1].append(text)

    def post(self, request_id: int | None = None) -> None:
        """Post what is pending for one request, or for all, in one message."""
        lanes = []
        for key in [request_id] if request_id is not None else list(self._pending):
            offsets, texts = self._pending.pop(key, ([], []))
            if offsets:
                if self._detailed is None or key in self._detailed:
                    lanes.append(LaneTokens.detailed(key, tuple(offsets), "".join(texts)))
                else:
                    lanes.append(LaneTokens(key, len(offsets), offsets[0], offsets[-1], None, "".join(texts)))
        if lanes:
            self._post(TokenBatch(tuple(lanes)))

    async def post_every(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            self.post()


class FeedsMixin:
    """Workers of `MainScreen`. Needs `self.client`, `self.settings`, `self.server_url`."""

    client: httpx.AsyncClient
    client_load: ClientLoad
    api: str | None
    model: str | None
    server_fresh: bool | None

    simulator: SimulatorProcess | None = None
    """The simulator phasetop started for this screen, if it did."""
    simulator_state: reactive[str] = reactive("running", bindings=True)
    """That simulator's state: "running", "exited" (without being asked: R restarts it) or "starting" (again)."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "restart_simulator":
            if self.simulator is None:
                return False  # hidden: phasetop started no simulator
            return True if self.simulator_state == "exited" else None
        return super().check_action(action, parameters)

    def follow_simulator(self) -> None:
        """Be told when the simulator exits on its own (its reading thread reaps it and posts the fact)."""
        simulator = self.simulator
        if simulator is None:
            return
        simulator.on_exit = lambda reason: self.post_message(SimulatorExited(reason))
        if not simulator.running:  # it died before the screen was up
            self.post_message(SimulatorExited(simulator.exit_line()))

    def on_simulator_exited(self, event: SimulatorExited) -> None:
        reason = one_line(event.reason, 300)
        self.simulator_state = "exited"
        self.query_one(GpuPane).server_exit = reason
        self.notify(f"the simulator phasetop started exited ({reason}). Press R to start it again.",
                    title="simulator exited", severity="error", timeout=30, markup=False)

    def action_restart_simulator(self) -> None:
        self.simulator_state = "starting"
        self.restart_simulator()

    @work(exclusive=True, group="simulator", thread=True, exit_on_error=False)
    def restart_simulator(self) -> None:
        """Start the simulator again on its old port: the URL, the client and the host sampler all stay right."""
        try:
            self.simulator.restart()
        except SimulatorError as error:
            self.post_message(SimulatorRestarted(str(error)))
        else:
            self.post_message(SimulatorRestarted())

    def on_simulator_restarted(self, event: SimulatorRestarted) -> None:
        if event.error:
            self.simulator_state = "exited"
            self.notify(one_line(event.error, 300), title="simulator not restarted", severity="error", markup=False)
            return
        self.simulator_state = "running"
        self.query_one(GpuPane).server_exit = None
        self.notify("the simulator is running again", title="simulator restarted", markup=False)

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
                await wait_to_retry(self.server_url, attempt)
                attempt += 1
                continue
            fresh = await server_is_fresh(self.client)
            self.post_message(ServerCameUp(api, info.model, info.max_model_len, info.version, info.model_bytes, fresh))
            return

    @work(group="requests", thread=True, exit_on_error=False)
    def send_requests(self, first_id: int, label: str, text: str | None, prompt_tokens: int | None,
                      concurrency: int, max_tokens: int, shared_prefix: str | None = None) -> None:
        """Send `concurrency` requests at once, on an event loop of their own in this thread.

        The UI's loop renders; if the reading loop shared it, a repaint would sit between a chunk's
        arrival and its timestamp. Here nothing does.
        """
        api, model, fresh = self.api, self.model, self.server_fresh
        if api is None or model is None:
            self.app.call_from_thread(self.notify, "the server is not known yet: wait for the header to say it is up",
                                      severity="warning")
            return
        # Cancelled (the app quits): the answers in flight are dropped at once, not waited for.
        loop.run(self._send_all(api, model, first_id, label, text, prompt_tokens, concurrency, max_tokens, shared_prefix,
                                   bool(fresh)), get_current_worker().cancelled_event)

    async def _send_all(self, api: str, model: str, first_id: int, label: str, text: str | None,
                        prompt_tokens: int | None, concurrency: int, max_tokens: int, shared_prefix: str | None,
                        fresh: bool) -> None:
        async with client_for(self.settings, self.server_url) as client:
            try:
                connect_s = await warm_up(client, WARM_UP_PATHS[api], concurrency)
            except SourceError as error:
                self.app.call_from_thread(self.notify, str(error), title="not sent", severity="error", markup=False)
                return
            # Fresh when it came up; confirmed now (after the warm-up has timed the connect), since the load
            # dial or another client may have used it since.
            cold_id = first_id if fresh and await server_is_fresh(client) else None
            jobs = []
            # The timeline shows the newest lanes: of a send, its last few; the prompt pane its last one's answer.
            last_id = first_id + concurrency - 1
            batches = TokenBatches(self.post_message, range(max(first_id, last_id - SHOWN_LANES + 1), last_id + 1), last_id)
            for n in range(concurrency):
                if text is not None:
                    body, tokens, estimated = text, None, True
                else:
                    prompt = await prompt_of(client, api, model, prompt_tokens or 200)
                    body, tokens, estimated = prompt.text, prompt.tokens, prompt.estimated
                    if shared_prefix:
                        body = shared_prefix + "\n" + body
                request = StreamRequest(api=api, model=model, prompt=body, max_tokens=max_tokens,
                                        prompt_tokens=tokens, prompt_tokens_estimated=estimated,
                                        exact_length=self.settings.exact_length)
                lane = label if concurrency == 1 else f"{label} {n + 1}"
                jobs.append(self._stream_one(client, batches, first_id + n, lane, request, connect_s, first_id + n == cold_id))
            poster = asyncio.create_task(batches.post_every(TOKEN_BATCH_S))
            try:
                await asyncio.gather(*jobs)
            finally:
                poster.cancel()

    async def _stream_one(self, client: httpx.AsyncClient, batches: TokenBatches, request_id: int, label: str,
                          request: StreamRequest, connect_s: float | None, first_to_fresh: bool = False) -> None:
        """Stream one request; `first_to_fresh`: it is the first a fresh server serves, so it is marked cold."""
        self.post_message(RequestStarted(request_id, label, time.time(), request.prompt_tokens))
        async for event in stream(client, request, connect_s):
            if isinstance(event, ChunkArrived):
                batches.add(request_id, event.offset_s, event.text)
            elif isinstance(event, RequestFinished):
                batches.post(request_id)  # its last chunks before its completion
                timing = mark_cold([event.timing], server_fresh=True)[0] if first_to_fresh else event.timing
                timing = self.client_load.mark(timing)
                self.post_message(RequestCompleted(request_id, timing))

    @work(exclusive=True, group="metrics", exit_on_error=False)
    async def poll_metrics(self) -> None:
        """Scrape /metrics every interval; a server that goes away is retried with backoff."""
        interval = self.settings.poll.metrics_interval_s
        # A rolling window of scrapes: one request's quantiles stay on the pane for window_s, not one scrape.
        scraper = MetricsScraper(self.client, window_s=self.settings.poll.metrics_window_s)
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
                await wait_to_retry(self.server_url, attempt)
                attempt += 1

    @work(exclusive=True, group="gpu", thread=True, exit_on_error=False)
    def poll_gpu(self) -> None:
        """NVML and psutil in a thread: their calls block. Stops when the worker is cancelled."""
        worker = get_current_worker()
        cancelled: threading.Event = worker.cancelled_event
        port = local_port(self.server_url)
        host = HostSampler(port)
        own = psutil.Process()
        own.cpu_percent(None)  # the first reading only starts the interval
        with GpuSampler(server_port=port) as gpu:
            while not cancelled.is_set():
                self.post_message(GpuSampled(gpu.sample()))
                self.post_message(HostSampled(host.sample()))
                cancelled.wait(self.settings.poll.gpu_interval_s)
                if not cancelled.is_set():
                    # Our own process: the streams' reading thread and the rendering share one GIL.
                    cpu_pct, now = own.cpu_percent(None), time.time()
                    self.client_load.sample(cpu_pct, now)
                    self.post_message(ClientSampled(cpu_pct, now))
