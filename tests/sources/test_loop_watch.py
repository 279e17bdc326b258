"""The meter watching its own loop: a span it could not read in is a stall, and the gaps read in one are its own."""

from __future__ import annotations

import asyncio
import time

import pytest

from tui.core.measure.records import RequestTiming
from tui.sources.loop_watch import PROBE_S, LoopWatch
from tui.sources.wall_clock import now_unix

BLOCK_S = 0.04


async def test_a_blocked_loop_is_one_stall_covering_the_block_and_an_unwatched_one_is_none():
    watch = LoopWatch(asyncio.get_running_loop())
    time.sleep(BLOCK_S)  # not watching: no probe runs, nothing is recorded
    await asyncio.sleep(0.01)
    assert watch.stalls == []
    with watch.watching():
        await asyncio.sleep(0.02)
        blocked_at = now_unix()
        time.sleep(BLOCK_S)  # the loop cannot run: the probe comes back late
        unblocked_at = now_unix()
        await asyncio.sleep(0.02)
    # the stall runs from when the probe was due (within a probe period of the block's start) to after it
    covering = [s for s in watch.stalls if s.start_unix <= blocked_at + PROBE_S and s.end_unix >= unblocked_at]
    assert covering, watch.stalls
    assert "ms late" in covering[0].why


@pytest.mark.timing  # a CPU share over real time: another test's load on the cores changes it
async def test_a_busy_meter_records_a_busy_interval():
    watch = LoopWatch(asyncio.get_running_loop(), busy_pct=25.0)  # a low bar: a loaded 2-core box may give us half a core
    with watch.watching():
        deadline = time.perf_counter() + 0.8
        while time.perf_counter() < deadline:  # burn the loop, yielding so the probe runs
            sum(range(10_000))
            await asyncio.sleep(0)
    assert watch.busy and all(pct >= 25.0 and stop > start for start, stop, pct in watch.busy)


async def stalled_reads(watch: LoopWatch) -> RequestTiming:
    """Six reads: 20 ms after the send, three 5 ms apart, one after a block of the loop, one 20 ms later."""
    with watch.watching():
        sent = now_unix()
        await asyncio.sleep(0.02)
        offsets = [now_unix() - sent]
        for _ in range(3):  # reads 5 ms apart
            await asyncio.sleep(0.005)
            offsets.append(now_unix() - sent)
        time.sleep(BLOCK_S)
        offsets.append(now_unix() - sent)  # read right after the stall: the gap before it is the meter's
        await asyncio.sleep(0.02)
        offsets.append(now_unix() - sent)
        return watch.judge(RequestTiming(ok=True, t_sent_unix=sent, token_offsets_s=tuple(offsets)))


@pytest.mark.timing  # "read in time": on a loaded box the 20 ms sleep before the first read can itself run late
async def test_a_first_chunk_read_in_time_leaves_the_request_unmarked():
    timing = await stalled_reads(LoopWatch(asyncio.get_running_loop()))
    assert 3 in timing.client_gaps
    assert timing.burst is None


async def test_judge_marks_the_gaps_read_in_a_stall_and_a_late_first_chunk():
    watch = LoopWatch(asyncio.get_running_loop())
    timing = await stalled_reads(watch)
    assert 3 in timing.client_gaps  # chunk 3 → 4 spans the block
    assert len(timing.itl_s) == len(timing.token_offsets_s) - 1 - len(timing.client_gaps)

    with watch.watching():
        sent = now_unix()
        time.sleep(BLOCK_S)
        late = watch.judge(RequestTiming(ok=True, t_sent_unix=sent, token_offsets_s=(now_unix() - sent,)))
    assert late.burst and "TTFT times the meter" in late.burst
