"""Sending the prompt pane's requests and streaming their tokens back as batched facts.

The streams are read and stamped by the screen's meter process (`tui.meter`), not here: this process renders,
and a repaint must never sit between a chunk's arrival and its stamp. What the meter read comes back once a
frame; this feed turns it into the screen's facts."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection
from contextlib import aclosing
from dataclasses import dataclass, field

from textual.message import Message

from tui.app.messages import NotSent, RequestCompleted, RequestOnWire, RequestStarted, TokenBatch
from tui.config import Settings
from tui.core.measure.chunk_tokens import compact, joined
from tui.core.measure.records import RequestTiming, mark_cold
from tui.core.measure.sends import Send
from tui.core.state.live import LaneTokens
from tui.core.view.timeline import KEEP_LANES
from tui.sources.detect import WARM_UP_PATHS
from tui.sources.errors import SourceError
from tui.sources.http import ServerClient, client_for
from tui.sources.identity import server_is_fresh
from tui.sources.meter import ChunksArrived, Meter
from tui.sources.stream import RequestFinished, RequestSent, StreamRequest
from tui.sources.wall_clock import now_unix
from tui.sources.workloads.prompts import prompt_of

Post = Callable[[Message], object]

TOKEN_BATCH_S = 0.05
"""Token arrivals are posted in batches this far apart: about 20 timeline updates a second at most."""
SHOWN_LANES = KEEP_LANES
"""Lanes the timeline can show: of each send, this many newest get every offset posted."""


@dataclass(slots=True)
class _Pending:
    """One request's chunks since the last post."""

    offsets: list[float] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    gaps: list[int] = field(default_factory=list)
    sizes: list[int] | None = None
    """The tokens of each, once one carried other than one (`chunk_tokens.joined`)."""


class TokenBatches:
    """Chunks the meter read since the last post, per request, posted as one `TokenBatch` of per-lane aggregates.

    One post for all the streams of a send keeps the screen near 20 updates a second however many
    streams run (32 streams posting on clocks of their own would ask for 640), and the aggregates keep
    the screen from walking every token: each offset only for the lanes the timeline can show (`detailed`),
    the text only for the one whose answer the prompt pane shows (`texted`); every other lane is a count
    and its first and last offsets. Each request's exact record still comes with its `RequestCompleted`.
    """

    def __init__(self, post: Post, detailed: Collection[int] | None = None, texted: int | None = None) -> None:
        self._post = post
        self._detailed = detailed
        """Requests whose every offset is posted; None: all."""
        self._texted = texted
        """The request whose text is posted; None: all."""
        self._pending: dict[int, _Pending] = {}

    def add(self, request_id: int, offsets_s: tuple[float, ...], text: str, client_gaps: tuple[int, ...] = (),
            tokens_per_chunk: tuple[int, ...] | None = None) -> None:
        pending = self._pending.get(request_id)
        if pending is None:
            pending = self._pending[request_id] = _Pending()
        pending.sizes = joined(pending.sizes, len(pending.offsets), tokens_per_chunk, len(offsets_s))
        pending.offsets.extend(offsets_s)
        pending.gaps.extend(client_gaps)
        if text and (self._texted is None or request_id == self._texted):
            pending.texts.append(text)

    def post(self, request_id: int | None = None) -> None:
        """Post what is pending for one request, or for all, in one message."""
        lanes = []
        for key in [request_id] if request_id is not None else list(self._pending):
            pending = self._pending.pop(key, None)
            if pending is None or not pending.offsets:
                continue
            offsets, text, sizes = pending.offsets, "".join(pending.texts), compact(pending.sizes)
            if self._detailed is None or key in self._detailed:
                lanes.append(LaneTokens.detailed(key, tuple(offsets), text, tuple(pending.gaps), sizes))
            else:
                tokens = sum(sizes) if sizes is not None else len(offsets)
                lanes.append(LaneTokens(key, tokens, offsets[0], offsets[-1], None, text))
        if lanes:
            self._post(TokenBatch(tuple(lanes)))

    async def post_every(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            self.post()


class RequestSender:
    """Sends to one server through `meter_for`'s meter (a client of its own makes the prompts)."""

    def __init__(self, settings: Settings, url: str, meter_for: Callable[[ServerClient], Meter], post: Post) -> None:
        self._settings = settings
        self._url = url
        self._meter_for = meter_for
        self._post = post

    async def send(self, send: Send, api: str, model: str, fresh: bool) -> None:
        """Run a send to its end (cancelled, as when the app quits, its streams stop at once). `fresh`: the server
        had served nothing when it came up."""
        async with client_for(self._settings, self._url) as client:
            meter = self._meter_for(client)
            try:
                connect_s = await meter.warm_up(WARM_UP_PATHS[api], send.concurrency)
                # Fresh when it came up; confirmed now (after the warm-up has timed the connect), since the load
                # dial or another client may have used it since.
                cold_id = send.first_id if fresh and await server_is_fresh(client) else None
                # Every prompt made first, then every request sent: a /tokenize call while the first streams are
                # already on the server would sit in front of the next one's arrival (its TTFT's send side).
                requests = [await self._request(client, send, api, model) for _ in range(send.concurrency)]
            except SourceError as error:
                self._post(NotSent(str(error), range(send.first_id, send.first_id + send.concurrency)))
                return
            # The timeline shows the newest lanes: of a send, its last few; the prompt pane its last one's answer.
            last_id = send.first_id + send.concurrency - 1
            batches = TokenBatches(self._post, range(max(send.first_id, last_id - SHOWN_LANES + 1), last_id + 1), last_id)
            jobs = []
            for n, request in enumerate(requests):
                lane = send.label if send.concurrency == 1 else f"{send.label} {n + 1}"
                request_id = send.first_id + n
                jobs.append(stream_lane(meter, batches, self._post, request_id, lane, request, connect_s,
                                        texted=request_id == last_id, cold=request_id == cold_id))
            poster = asyncio.create_task(batches.post_every(TOKEN_BATCH_S))
            try:
                await asyncio.gather(*jobs)
            finally:
                poster.cancel()

    async def _request(self, client: ServerClient, send: Send, api: str, model: str) -> StreamRequest:
        """One of the send's requests: the typed text, or a filler prompt of its length (behind the shared prefix)."""
        if send.text is not None:
            body, tokens, estimated = send.text, None, True
        else:
            prompt = await prompt_of(client, api, model, send.prompt_tokens or 200)
            body, tokens, estimated = prompt.text, prompt.tokens, prompt.estimated
            if send.shared_prefix:
                body = send.shared_prefix + "\n" + body
        return StreamRequest(api=api, model=model, prompt=body, max_tokens=send.max_tokens, prompt_tokens=tokens,
                             prompt_tokens_estimated=estimated, exact_length=self._settings.exact_length)


async def stream_lane(meter: Meter, batches: TokenBatches, post: Post, request_id: int, label: str,
                      request: StreamRequest, connect_s: float | None = None, texted: bool = False, cold: bool = False,
                      load: bool = False) -> RequestTiming:
    """One request through `meter`, as the screen's facts for lane `request_id`: its start, its chunks (batched),
    its exact record (marked cold when `cold`: the first a fresh server serves), which is returned. `texted`: its
    answer is the one the prompt pane shows; `load`: one of the load dial's."""
    started_unix = now_unix()
    post(RequestStarted(request_id, label, started_unix, request.prompt_tokens, load))
    timing = None
    try:
        async with aclosing(meter.stream(request, connect_s, text=texted)) as events:
            async for event in events:
                if isinstance(event, ChunksArrived):
                    batches.add(request_id, event.offsets_s, event.text, event.client_gaps, event.tokens_per_chunk)
                elif isinstance(event, RequestSent):
                    post(RequestOnWire(request_id, event.t_sent_unix))
                elif isinstance(event, RequestFinished):
                    batches.post(request_id)  # its last chunks before its completion
                    timing = mark_cold([event.timing], server_fresh=True)[0] if cold else event.timing
                    post(RequestCompleted(request_id, timing, load))
        assert timing is not None, "a meter's stream ends with its record"
    except Exception as error:  # a fault of phasetop's own: the lane ends failed, not in flight for good
        if timing is None:
            failed = RequestTiming(ok=False, t_sent_unix=started_unix, prompt_tokens=request.prompt_tokens,
                                   error=f"phasetop stopped timing it: {type(error).__name__}: {error}")
            post(RequestCompleted(request_id, failed, load))
        raise
    return timing


class NewestIds:
    """The `count` newest ids handed out (by `take`): the lanes a timeline can show, for `TokenBatches`."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._newest = 0

    def seen(self, request_id: int) -> None:
        self._newest = max(self._newest, request_id)

    def __contains__(self, request_id: object) -> bool:
        return isinstance(request_id, int) and request_id > self._newest - self._count


class LaneMeter:
    """A `Meter` that puts each request it measures on the timeline as lane "load N" (the load dial's), with ids
    from `take_ids` (the screen's, taken from the load's thread), every offset posted for the newest lanes the
    timeline can show, a count for the rest. `post_batches` must run beside it in the load's loop."""

    def __init__(self, meter: Meter, take_ids: Callable[[int], int], post: Post) -> None:
        self._meter = meter
        self._take_ids = take_ids
        self._post = post
        self._shown = NewestIds(SHOWN_LANES)
        self._batches = TokenBatches(post, self._shown)
        self._sent = 0

    async def warm_up(self, path: str, connections: int = 1) -> float | None:
        return await self._meter.warm_up(path, connections)

    def stream(self, request: StreamRequest, connect_s: float | None = None, text: bool = False):
        return self._meter.stream(request, connect_s, text)

    async def measure(self, request: StreamRequest, connect_s: float | None = None) -> RequestTiming:
        request_id = self._take_ids(1)
        self._shown.seen(request_id)
        self._sent += 1
        return await stream_lane(self._meter, self._batches, self._post, request_id, f"load {self._sent}", request,
                                 connect_s, load=True)

    async def post_batches(self) -> None:
        await self._batches.post_every(TOKEN_BATCH_S)
