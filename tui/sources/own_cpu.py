"""phasetop's own CPU while it streams: the intervals in which it was near a core (its stamps then time
its own reading, not the server), for `core.client_load.mark_busy`."""

from __future__ import annotations

import asyncio
import time

from tui.core.client_load import CLIENT_BUSY_PCT, BusyInterval

SAMPLE_EVERY_S = 0.5


async def watch_own_cpu(busy: list[BusyInterval], every_s: float = SAMPLE_EVERY_S, busy_pct: float = CLIENT_BUSY_PCT) -> None:
    """Until cancelled: append each interval in which this process used at least `busy_pct` of one core."""
    wall, cpu = time.time(), time.process_time()
    while True:
        await asyncio.sleep(every_s)
        now_wall, now_cpu = time.time(), time.process_time()
        pct = (now_cpu - cpu) / max(now_wall - wall, 1e-9) * 100
        if pct >= busy_pct:
            busy.append((wall, now_wall, pct))
        wall, cpu = now_wall, now_cpu
