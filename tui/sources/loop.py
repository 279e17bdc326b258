"""One way to run a coroutine to completion: on uvloop where it is installed, else on asyncio's own loop.

uvloop (libuv) costs less CPU per socket read than asyncio's selector loop, and the wakeups come back
sooner: at 128 streams phasetop's stamps landed 2–7 × closer to the server's writes (README.md,
"Client timing fidelity"). Every loop that reads token streams runs here: the CLI's, and the UI's
request threads (Textual's own loop stays asyncio's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

try:
    import uvloop
except ImportError:  # Windows, or a build without it
    uvloop = None


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the fastest loop available."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop if uvloop is not None else None) as runner:
        return runner.run(main)
