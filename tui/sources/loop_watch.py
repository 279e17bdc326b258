"""The meter watching itself: the spans in which its loop could not read, and its own CPU, while it streams.

A probe runs on the reading loop every `PROBE_S`. When it runs more than `STALL_S` late, the loop could not get to
it from when it was due until now: chunks that arrived meanwhile waited in the socket, and were stamped late.
That span is a `Stall` (whatever the cause: another process had the core, or the loop was busy reading other
streams). Beside it, the loop's process CPU: at `CLIENT_BUSY_PCT` of a core its stamps queue behind its own
work. Both judge each finished request (`judge`): gaps read during a stall are the client's
(`RequestTiming.client_gaps`), and a request timed while the meter was that busy is marked.

The probe runs only while a stream is open (`watching`), so an idle meter costs nothing.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from bisect import bisect_left
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from itertools import takewhile
from time import perf_counter

from tui.core.measure.client_load import CLIENT_BUSY_PCT, BusyInterval, mark_busy
from tui.core.measure.gaps import Stall, client_gaps, first_read_late, last_read_late
from tui.core.measure.records import RequestTiming
from tui.sources.wall_clock import unix_at

PROBE_S = 0.002
"""How often the probe asks to run: a stall shorter than this may go unseen, one longer never does."""
STALL_S = 0.0015
"""Lateness that counts as a stall: an idle loop's timer fires under 0.8 ms late in 999 of 1,000 (uvloop, here)."""
CPU_EVERY_S = 0.5
"""The meter's CPU is read over intervals this long."""
KEEP_STALLS = 20_000
KEEP_BUSY = 2_000
"""The newest stalls and busy intervals kept (a request is judged against those of its own span)."""

_watches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopWatch] = weakref.WeakKeyDictionary()


class LoopWatch:
    """One loop's stalls and busy intervals; `of_running_loop()` gives the one of the loop calling it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, busy_pct: float = CLIENT_BUSY_PCT) -> None:
        self._loop = loop
        self._busy_pct = busy_pct
        self.stalls: list[Stall] = []
        """Spans in which the loop could not read, in the order they ended (the newest `KEEP_STALLS` or more)."""
        self.busy: deque[BusyInterval] = deque(maxlen=KEEP_BUSY)
        """Intervals in which this process used at least `busy_pct` of a core."""
        self.cpu_pct: float | None = None
        """This process's CPU over the latest interval, percent of one core."""
        self._watchers = 0
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._cpu_at = (0.0, 0.0)

    @classmethod
    def of_running_loop(cls) -> LoopWatch:
        loop = asyncio.get_running_loop()
        watch = _watches.get(loop)
        if watch is None:
            watch = _watches[loop] = cls(loop)
        return watch

    @contextmanager
    def watching(self) -> Iterator[None]:
        """While a stream is open: the probe runs (the first opener starts it, the last closer stops it)."""
        self._watchers += 1
        if self._watchers == 1:
            now = perf_counter()
            self._cpu_at = (now, time.process_time())
            self._schedule(now)
        try:
            yield
        finally:
            self._watchers -= 1
            if self._watchers == 0 and self._timer is not None:
                self._probe()  # a stall under way when the last stream ended is recorded too
                self._timer.cancel()
                self._timer = None

    def _schedule(self, now: float) -> None:
        self._due = now + PROBE_S
        self._timer = self._loop.call_at(self._loop.time() + PROBE_S, self._probe)

    def _probe(self) -> None:
        now = perf_counter()
        late = now - self._due
        if late > STALL_S:  # from when it was due: until then the loop may just have been waiting for it
            self.stalls.append(Stall(unix_at(self._due), unix_at(now), f"the meter's loop ran {late * 1e3:,.1f} ms late"))
            if len(self.stalls) > 2 * KEEP_STALLS:
                del self.stalls[:-KEEP_STALLS]
        started, cpu = self._cpu_at
        if now - started >= CPU_EVERY_S:
            spent = time.process_time()
            self.cpu_pct = (spent - cpu) / (now - started) * 100
            if self.cpu_pct >= self._busy_pct:
                self.busy.append((unix_at(started), unix_at(now), self.cpu_pct))
            self._cpu_at = (now, spent)
        if self._watchers:
            self._schedule(now)

    def stalls_between(self, start_unix: float, end_unix: float) -> list[Stall]:
        """The stalls that touch [start, end], one under way now included (the probe is overdue)."""
        first = bisect_left(self.stalls, start_unix, key=lambda stall: stall.end_unix)
        found = list(takewhile(lambda stall: stall.start_unix <= end_unix, self.stalls[first:]))
        now = perf_counter()
        if self._watchers and now - self._due > STALL_S:
            found.append(Stall(unix_at(self._due), unix_at(now), f"the meter's loop is {(now - self._due) * 1e3:,.1f} ms late"))
        return found

    def judge(self, timing: RequestTiming) -> RequestTiming:
        """The timing with the gaps this meter caused marked, and `burst` set when its first or last chunk was read late
        (its TTFT, or its decode rate, would time the meter) or it streamed while the meter was near a core (an
        existing reason is kept)."""
        if not timing.token_offsets_s:
            return timing
        end = timing.t_sent_unix + timing.token_offsets_s[-1]
        stalls = self.stalls_between(timing.t_sent_unix, end)
        if stalls:
            timing = replace(timing, client_gaps=client_gaps(timing.t_sent_unix, timing.token_offsets_s, stalls))
            first = first_read_late(timing.t_sent_unix, timing.token_offsets_s, stalls)
            last = last_read_late(timing.t_sent_unix, timing.token_offsets_s, stalls)
            if timing.ok and not timing.burst and (first or last):
                what = "first chunk was read late ({}): its TTFT" if first else "last chunk was read late ({}): its decode rate"
                timing = replace(timing, burst=f"its {what.format((first or last).why)} times the meter")
        return mark_busy([timing], list(self.busy))[0]
