"""One clock for every stamp: perf_counter, read as wall-clock seconds through one offset taken once.

A request's send time, its chunks' arrivals and the meter's own stalls must sit on one axis whichever process
stamped them, or a gap could not be laid beside a stall, nor one stream's tokens beside another's. perf_counter
is system-wide (CLOCK_MONOTONIC on Linux, mach_absolute_time on macOS, QueryPerformanceCounter on Windows), so
a meter process that takes its parent's offset (`set_offset`) stamps on the parent's clock exactly. The offset is
the wall clock at perf_counter's zero as read once at start: a wall clock stepped later (NTP) moves no stamp.
"""

from __future__ import annotations

import time

_offset_s = time.time() - time.perf_counter()


def offset_s() -> float:
    """Wall-clock seconds at perf_counter's zero, as this process reads them."""
    return _offset_s


def set_offset(value_s: float) -> None:
    """Take another process's offset (a meter takes its parent's), so both stamp on one clock."""
    global _offset_s
    _offset_s = value_s


def unix_at_ns(perf_ns: int) -> float:
    """The wall-clock time of a `perf_counter_ns()` reading."""
    return _offset_s + perf_ns / 1e9


def unix_at(perf_s: float) -> float:
    """The wall-clock time of a `perf_counter()` reading."""
    return _offset_s + perf_s


def now_unix() -> float:
    """Now, on this clock."""
    return _offset_s + time.perf_counter()
