"""The streamed answers' writer: a raw ASGI response that sends each stream's due tokens in one write per step.

Starlette's `StreamingResponse` costs a task group, a disconnect listener, an async generator and
three wrapped `send`s per chunk, and each token woke its stream's task: at 256 streams that per-token
Python is what made tokens fall behind their step. Here the engine hands a stream its due events at
the step's deadline (`Stream.deliver`), the writer frames them in one `bytes` from pre-built pieces,
and gives that to the server's own `send` (under Starlette's wrappers, which only watch
`http.response.start`) without a task switch. The last token, the closing payload and the end of the
chunked body go out in the same write.
"""

from __future__ import annotations

import asyncio
import json
from typing import Protocol

from starlette.types import Receive, Scope, Send

from tui.sim.admission import Admitted
from tui.sim.engine import LAG_SAMPLES_MAX, EngineDriver, Stream, TokenEvent, now
from tui.sim.physics import Sequence
from tui.sim.state import SimState, finish

RAW_SEND = "phasetop.sim.send"
"""Scope key under which the simulator's app keeps the server's own `send` (see `server.SimApp`)."""

_JSON_TEXT: dict[str, bytes] = {}
_JSON_TEXT_MAX = 8192


def json_text(text: str) -> bytes:
    """`json.dumps(text)` as bytes, from a cache: generated text comes from a small fixed vocabulary."""
    encoded = _JSON_TEXT.get(text)
    if encoded is None:
        encoded = json.dumps(text).encode()
        if len(_JSON_TEXT) < _JSON_TEXT_MAX:
            _JSON_TEXT[text] = encoded
    return encoded


class Frames(Protocol):
    """A stream's wire format: the bytes of each token event, and of the end."""

    def frame(self, events: list[TokenEvent], parts: list[bytes]) -> None:
        """Append the bytes of one chunk to `parts` (joined once per write): the tokens due at one moment (one, or a
        speculative step's, or a stream interval's)."""

    def closing(self, sequence: Sequence) -> bytes:
        """What follows the last token's event (usage, [DONE], the counters)."""


class TokenStreamResponse:
    """Submit a request, then stream its tokens as they fall due; a client that leaves aborts it."""

    def __init__(self, state: SimState, admitted: Admitted, media_type: str, frames: Frames,
                 request_id: str | None = None) -> None:
        self.state = state
        self.admitted = admitted
        self.frames = frames
        self.request_id = request_id
        """The id its trace span carries (`state.finish`)."""
        content_type = media_type + "; charset=utf-8" if media_type.startswith("text/") else media_type
        self.headers = [(b"content-type", content_type.encode("latin-1"))]  # as StreamingResponse sets them

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.headers})
        admitted = self.admitted
        stream = self.state.driver.submit(admitted.prompt_ids, admitted.max_tokens, admitted.finish_reason)
        writer = _Writer(stream, self.frames, scope.get(RAW_SEND, send), self.state.driver)
        watcher = asyncio.create_task(_watch_disconnect(receive, writer))
        try:
            await writer.done
        finally:
            watcher.cancel()
            finish(self.state, stream, self.request_id)


class _Writer:
    """Writes a stream's due events from inside the engine's step loop: one `send` per stream per step.

    The server's `send` is a coroutine that returns without suspending unless the socket's buffer is
    full, so `deliver` runs it to completion by hand (`coroutine.send(None)`) instead of waking a task
    per stream per step. When it does suspend (a client reading slowly), a task finishes that write
    and then writes whatever fell due meanwhile in one go, while `busy` keeps the engine's hands off.
    """

    def __init__(self, stream: Stream, frames: Frames, write: Send, driver: EngineDriver) -> None:
        self.stream = stream
        self.frames = frames
        self.write = write
        self.driver = driver
        self.loop = asyncio.get_running_loop()
        self.done: asyncio.Future[None] = self.loop.create_future()
        """Resolved once the last chunk is written or the client left; holds what a write raised."""
        self.busy = False
        self.lag_s = driver.lag_s
        self._framed: tuple[dict, bool, list[TokenEvent]] | None = None
        """(message, last, events) framed before their deadline by `prepare`, sent by `deliver`."""
        stream.deliver = self.deliver
        stream.prepare = self.prepare

    def prepare(self) -> None:
        """Frame the staged events now, before they are due (the send waits for `deliver`)."""
        if self.busy or self.done.done() or self._framed is not None:
            return  # left staged: released into `pending`, where the write in flight picks them up
        events, self.stream.staged = self.stream.staged, []
        message, last = self._message(events)
        self._framed = (message, last, events)

    def deliver(self) -> None:
        """The engine pushed an event (at its step's deadline) or the client left: write what is due now."""
        if self.busy or self.done.done():
            return
        stream = self.stream
        if stream.closed:
            self.done.set_result(None)
            return
        try:
            if self._framed is not None:
                (message, last, events), self._framed = self._framed, None
                if stream.pending:  # older events still unwritten go first, in the same write
                    events, stream.pending = stream.pending + events, []
                    message, last = self._message(events)
            else:
                events, stream.pending = stream.pending, []
                message, last = self._message(events)
            write = self.write(message)
            try:
                suspended_on = write.send(None)
            except StopIteration:
                lag_s = self.lag_s
                if len(events) == 1 and not last and len(lag_s) < LAG_SAMPLES_MAX:  # the common case, kept short
                    lag_s.append(now() - events[0].due)  # handed to the socket just now
                else:
                    self._written(events, last)
                return
            self.busy = True
            self.loop.create_task(self._finish(write, suspended_on, events, last))
        except Exception as error:  # noqa: BLE001: handed to the response's task, which raises it there
            self.done.set_exception(error)

    async def _finish(self, write, suspended_on, events: list[TokenEvent], last: bool) -> None:
        """Finish a write that suspended, then write what fell due meanwhile, until caught up."""
        stream = self.stream
        try:
            await resume(write, suspended_on)
            self._written(events, last)
            while stream.pending and not stream.closed and not self.done.done():
                events, stream.pending = stream.pending, []
                message, last = self._message(events)
                await self.write(message)
                self._written(events, last)
            if stream.closed and not self.done.done():
                self.done.set_result(None)
        except Exception as error:  # noqa: BLE001: handed to the response's task, which raises it there
            if not self.done.done():
                self.done.set_exception(error)
        finally:
            self.busy = False

    def _message(self, events: list[TokenEvent]) -> tuple[dict, bool]:
        parts: list[bytes] = []
        frames = self.frames
        if len(events) == 1:
            frames.frame(events, parts)
        else:  # a chunk per moment due: a step's tokens go out together, a backlog's steps apart
            start = 0
            for end in range(1, len(events) + 1):
                if end == len(events) or events[end].due != events[start].due:
                    frames.frame(events[start:end], parts)
                    start = end
        last = events[-1].finished
        if last:
            parts.append(frames.closing(self.stream.sequence))
        return {"type": "http.response.body", "body": b"".join(parts), "more_body": not last}, last

    def _written(self, events: list[TokenEvent], last: bool) -> None:
        self.driver.record_written(now(), events)  # the moment the bytes were handed to the socket
        if last and not self.done.done():
            self.done.set_result(None)

    def stop(self) -> None:
        """The client went away: end the response (an unfinished request is aborted by its task)."""
        self.stream.close()
        if not self.busy and not self.done.done():
            self.done.set_result(None)


async def resume(coroutine, suspended_on) -> None:
    """Run to its end a coroutine that `coroutine.send(None)` left suspended, as a task would have.

    `suspended_on` is what it yielded: the future it waits for (or None, for a bare `sleep(0)`).
    """
    while True:
        try:
            if suspended_on is None:
                await asyncio.sleep(0)
            else:
                suspended_on._asyncio_future_blocking = False  # taken over, as a task takes what it is yielded
                await suspended_on
        except BaseException as error:  # noqa: BLE001: delivered into the coroutine, as a task would
            try:
                suspended_on = coroutine.throw(error)
            except StopIteration:
                return
            continue
        try:
            suspended_on = coroutine.send(None)
        except StopIteration:
            return


async def _watch_disconnect(receive: Receive, writer: _Writer) -> None:
    """Stop the writer when the client goes away (the request body was read before the response)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            writer.stop()
            return
