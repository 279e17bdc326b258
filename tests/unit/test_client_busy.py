"""The CLI's client-busy guard: the intervals phasetop was near a core, and the requests they mark."""

from __future__ import annotations

import asyncio
import time

from tui.core.client_load import mark_busy
from tui.core.records import RequestTiming
from tui.sources.own_cpu import watch_own_cpu


def _timing(sent: float, last_offset: float, burst: str | None = None, ok: bool = True) -> RequestTiming:
    return RequestTiming(ok=ok, t_sent_unix=sent, token_offsets_s=(0.1, last_offset), burst=burst)


def test_only_requests_that_streamed_during_a_busy_interval_are_marked():
    before, during, after, spanning = _timing(100.0, 0.5), _timing(101.2, 0.3), _timing(103.0, 0.5), _timing(99.0, 5.0)
    marked = mark_busy([before, during, after, spanning], [(101.0, 102.0, 97.0)])
    assert [t.burst is not None for t in marked] == [False, True, False, True]
    assert "busy (97 % of a core)" in marked[1].burst


def test_an_earlier_reason_and_a_failed_request_are_left_as_they_are():
    clumped, failed = _timing(101.2, 0.3, burst="clumped"), _timing(101.2, 0.3, ok=False)
    assert [t.burst for t in mark_busy([clumped, failed], [(101.0, 102.0, 97.0)])] == ["clumped", None]


async def test_a_busy_loop_is_recorded_as_a_busy_interval_and_an_idle_one_is_not():
    busy: list = []
    # A low bar: on a loaded 2-core box the burning loop may get half a core or less; idle is near 0 %.
    watch = asyncio.create_task(watch_own_cpu(busy, every_s=0.2, busy_pct=25.0))
    await asyncio.sleep(0.45)  # idle: two quiet intervals
    quiet = len(busy)
    deadline = time.perf_counter() + 0.5
    while time.perf_counter() < deadline:  # burn the loop; the watcher wakes only when we yield
        sum(range(10_000))
        await asyncio.sleep(0)
    await asyncio.sleep(0.25)
    watch.cancel()
    assert quiet == 0
    assert busy and all(pct >= 25.0 and stop > start for start, stop, pct in busy)
