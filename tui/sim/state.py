"""The live objects one simulator app shares between its routes, and the token stream both APIs read."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from starlette.requests import Request

from tui.sim.admission import Admitted
from tui.sim.engine import EngineDriver, Stream, TokenEvent, now
from tui.sim.metrics import SimMetrics
from tui.sim.options import SimOptions
from tui.sim.span_export import SpanExporter, served_request


@dataclass
class SimState:
    options: SimOptions
    driver: EngineDriver
    metrics: SimMetrics
    spans: SpanExporter | None = None
    """Exports each finished request's span (`--otlp-traces-endpoint`); None when not asked."""


def state_of(request: Request) -> SimState:
    return request.app.state.sim


async def tokens(state: SimState, admitted: Admitted, request_id: str | None = None) -> AsyncIterator[tuple[Stream, TokenEvent]]:
    """Submit a request and yield its tokens as they fall due; leaving early aborts it and frees its KV.

    For answers collected whole (the streamed ones write through `streaming.TokenStreamResponse`).
    A token's lag is taken when the caller comes back for the next one, as a streamed one's is taken
    when its chunk has been handed to the socket.
    """
    driver = state.driver
    stream = driver.submit(admitted.prompt_ids, admitted.max_tokens, admitted.finish_reason)
    try:
        while events := await stream.take():
            for event in events:
                yield stream, event
                driver.record_written(now(), [event])
                if event.finished:
                    return
    finally:
        finish(state, stream, request_id)


def finish(state: SimState, stream: Stream, request_id: str | None = None) -> None:
    """A request's stream is done (or its client left): count an abort if it had not finished, free its KV; a
    finished one's span is exported under `request_id` (vLLM's `gen_ai.request.id`), when spans are."""
    sequence = stream.sequence
    if not sequence.finished:
        state.metrics.count_abort()
    elif state.spans is not None:
        state.spans.offer(served_request(sequence, request_id or f"sim-{sequence.request_id}", now(), time.time()))
    state.driver.abort(stream)
