"""The UI's trace receiver: phasetop's OTLP/HTTP receiver served from a thread of its own, each export's requests
posted to the main screen as they come, its counts posted when they change without any (an export refused)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

from textual.message import Message
from textual.worker import get_current_worker

from tui.app.traffic_messages import TraceReceiverStopped, TracesReceived, TracesTallied
from tui.core.telemetry.otlp_spans import SpanBatch
from tui.core.telemetry.served import TraceWindow
from tui.core.untrusted import one_line
from tui.sources import loop
from tui.net import url_of
from tui.sources.otlp_receiver import TRACES_PATH, TraceReceiver

Post = Callable[[Message], object]

TALLY_EVERY_S = 1.0
RECEIVER_WINDOW = 16
"""The receiver's own window is only what the UI has not yet been given: the screen keeps the window shown."""


def endpoint_of(sock: socket.socket) -> str:
    """The URL an exporter sends to: `--otlp-traces-endpoint` for vLLM and phasetop's simulator."""
    return url_of(sock) + TRACES_PATH


def serve_traces(sock: socket.socket, post: Post) -> None:
    """In a thread worker: serve on `sock` until the worker is cancelled (the app quits)."""
    receiver = TraceReceiver(TraceWindow(max_records=RECEIVER_WINDOW))

    def batch_in(batch: SpanBatch) -> None:
        post(TracesReceived(tuple(batch.records), tuple(batch.server_spans), receiver.window.tally.copy(),
                            receiver.last_refusal))

    receiver.on_batch = batch_in

    async def serving() -> None:
        tallying = asyncio.ensure_future(_post_tallies(receiver, post))
        try:
            await receiver.serve(sock)
        finally:
            tallying.cancel()

    try:
        loop.run(serving(), get_current_worker().cancelled_event)
    except OSError as error:
        post(TraceReceiverStopped(f"the trace receiver stopped: {one_line(error.strerror or error, 200)}"))
    finally:
        receiver.stop()


async def _post_tallies(receiver: TraceReceiver, post: Post) -> None:
    """The counts, when they moved without a batch of requests to carry them."""
    said = receiver.window.tally.copy()
    while True:
        await asyncio.sleep(TALLY_EVERY_S)
        now = receiver.window.tally
        if now.refused_posts != said.refused_posts or now.rejected_spans != said.rejected_spans:
            said = now.copy()
            post(TracesTallied(said, receiver.last_refusal))
