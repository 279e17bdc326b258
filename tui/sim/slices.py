"""A route's long work done on the loop in slices, so a step that falls due waits for one slice, not for the whole job.

vLLM tokenizes in its API server process, apart from the engine core. Here the routes share the loop that times the
steps, and tokenizing a 32k-token prompt there takes about 7 ms. So the work is cut into slices of about 0.2 ms each.
Between slices the loop takes a turn, and its timers run first, so a step that has fallen due starts before the next
slice. Concurrent jobs take turns one slice at a time. The wait a step sees then stays inside the room the engine's
early wake-up leaves before each deadline (`engine.TIMER_SLACK_S`). A job of one slice (most prompts) runs at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar
from weakref import WeakKeyDictionary

from tui.sim import tokenizer

SLICE_CHARS = 2048
"""Text tokenized per slice: about 400 tokens, 0.1–0.2 ms on this machine."""
SLICE_ITEMS = 1024
"""Token ids checked per slice."""

T = TypeVar("T")
R = TypeVar("R")

_turns: WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = WeakKeyDictionary()
"""Each loop's turn for a slice: one lock per loop (a simulator in a test runs on its own)."""


async def in_slices(items: Iterable[T], work: Callable[[T], R]) -> list[R]:
    """`work(item)` for each item, in order: the first at once, and each later one after the loop has had a turn."""
    results: list[R] = []
    turn = None
    for item in items:
        if turn is None:
            turn = _turns.setdefault(asyncio.get_running_loop(), asyncio.Lock())
            results.append(work(item))
            continue
        async with turn:  # held over the turn: another job's next slice waits for this one's
            await asyncio.sleep(0)
            results.append(work(item))
    return results


def chunks(items: Sequence[T], size: int = SLICE_ITEMS) -> list[Sequence[T]]:
    """`items` in runs of `size`."""
    return [items[start:start + size] for start in range(0, len(items), size)]


async def encode(text: str) -> list[int]:
    """`tokenizer.encode(text)`, a slice of text at a time."""
    ids: list[int] = []
    await in_slices(tokenizer.text_slices(text, SLICE_CHARS), lambda part: ids.extend(tokenizer.encode(part)))
    return ids


async def all_true(items: Sequence[T], test: Callable[[T], bool]) -> bool:
    """Whether `test` holds for every item, a slice of items at a time."""
    return all(await in_slices(chunks(items), lambda chunk: all(test(item) for item in chunk)))
