"""A FIFO semaphore whose size may change while it is held: the load dial's concurrency, turned live."""

from __future__ import annotations

import asyncio
import math
from collections import deque


class Gate:
    """A FIFO semaphore whose size may change while it is held; `limit` None is no limit."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.in_flight = 0
        self.peak = 0
        self._waiters: deque[asyncio.Future[bool]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    @property
    def free(self) -> float:
        return math.inf if self.limit is None else max(self.limit - self.in_flight, 0)

    async def acquire(self) -> bool:
        """True once a slot is held; False if the wait was dropped (`drop_waiters`)."""
        if not self._waiters and self.free:
            self._take()
            return True
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.result():
                self.release()  # a slot was handed over just as we were cancelled
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        self.in_flight -= 1
        self.wake()

    def wake(self) -> None:
        """Hand free slots to waiters in arrival order (after a release, or a larger limit)."""
        while self._waiters and self.free:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._take()
                waiter.set_result(True)

    def drop_waiters(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(False)

    def _take(self) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
