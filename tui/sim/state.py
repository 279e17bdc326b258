"""The live objects one simulator app shares between its routes, and the token stream both APIs read."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from starlette.requests import Request

from tui.sim.admission import Admitted
from tui.sim.engine import EngineDriver, Stream, TokenEvent
from tui.sim.metrics import SimMetrics
from tui.sim.options import SimOptions


@dataclass
class SimState:
    options: SimOptions
    driver: EngineDriver
    metrics: SimMetrics


def state_of(request: Request) -> SimState:
    return request.app.state.sim


async def tokens(state: SimState, admitted: Admitted) -> AsyncIterator[tuple[Stream, TokenEvent]]:
    """Submit a request and yield its tokens as they fall due; leaving early aborts it and frees its KV.

    Between two yields the caller writes the chunk, so the time this generator is resumed is the
    moment the previous chunk was handed to the socket: that is where emission lag is measured.
    """
    driver = state.driver
    stream = driver.submit(admitted.prompt_ids, admitted.max_tokens, admitted.finish_reason)
    loop = asyncio.get_running_loop()
    try:
        while True:
            event = await stream.queue.get()
            yield stream, event
            driver.record_lag(loop.time() - event.due)
            if event.finished:
                return
    finally:
        if not stream.sequence.finished:
            state.metrics.count_abort()
        driver.abort(stream)
