"""One way to run a coroutine to completion: on uvloop where it is installed, else on asyncio's own loop.

uvloop (libuv) costs less CPU per socket read than asyncio's selector loop, and the wakeups come back
sooner: at 128 streams phasetop's stamps landed 2–7 × closer to the server's writes (README.md,
"Client timing fidelity"). Every loop that reads token streams runs here: the CLI's, and the UI's
request threads (Textual's own loop stays asyncio's).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar, overload

T = TypeVar("T")

try:
    import uvloop
except ImportError:  # Windows, or a build without it
    uvloop = None

CANCEL_POLL_S = 0.05
"""How often a loop run with `cancelled` looks at it: quitting the UI waits at most this long for a thread."""


@overload
def run(main: Coroutine[Any, Any, T], cancelled: None = None) -> T: ...
@overload
def run(main: Coroutine[Any, Any, T], cancelled: threading.Event) -> T | None: ...
def run(main: Coroutine[Any, Any, T], cancelled: threading.Event | None = None) -> T | None:
    """`asyncio.run(main)` on the fastest loop available.

    With `cancelled` (a thread worker's `cancelled_event`), `main` is cancelled soon after it is set, and
    None returned: a UI that quits does not wait for the answers in flight (the thread would hold the
    process until they ended, asyncio.run waiting on its executor).
    """
    with asyncio.Runner(loop_factory=uvloop.new_event_loop if uvloop is not None else None) as runner:
        return runner.run(main if cancelled is None else _until(main, cancelled))


async def _until(main: Coroutine[Any, Any, T], cancelled: threading.Event) -> T | None:
    task = asyncio.ensure_future(main)
    # A threading.Event has no callback to wake a loop, and the setter (Textual's loop) knows nothing of this one.
    while not task.done():
        if cancelled.is_set():
            task.cancel()
            break
        await asyncio.wait({task}, timeout=CANCEL_POLL_S)
    try:
        return await task
    except asyncio.CancelledError:
        if cancelled.is_set():
            return None
        raise
