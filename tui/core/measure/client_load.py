"""Is phasetop itself the bottleneck? The meter's own CPU, and the requests it timed while it was near a core.

A meter near one core reads its chunks in a queue behind its own work: a chunk waits before it is stamped,
and the stamps time the client, not the server. Requests that ran while it was that busy are marked (as the
measurement guard of `tui.core.measure.delivery` marks clumped ones) and kept out of findings and the diagnosis.
"""

from __future__ import annotations

from dataclasses import replace

from tui.core.measure.records import RequestTiming

CLIENT_BUSY_PCT = 85.0
"""Percent of one core at which a meter counts as busy: past it, its reads queue behind its own work."""


def busy_line(cpu_pct: float) -> str:
    """What the UI shows while a meter is busy."""
    return f"client busy: {cpu_pct:.0f} % CPU, figures marked"


def busy_reason(cpu_pct: float) -> str:
    """The `burst` reason of a request timed while the client was busy."""
    return f"the client was busy ({cpu_pct:.0f} % of a core) while this request streamed: its stamps may time its own reading"


BusyInterval = tuple[float, float, float]
"""(start unix, end unix, CPU % of one core) of an interval in which the client was busy."""


def mark_busy(timings: list[RequestTiming], intervals: list[BusyInterval]) -> list[RequestTiming]:
    """Each timing that streamed during a busy interval gets `burst` set (an existing reason is kept)."""
    marked = []
    for timing in timings:
        end = timing.t_sent_unix + (timing.e2e_s or 0.0)
        overlapping = [pct for start, stop, pct in intervals if start < end and stop > timing.t_sent_unix]
        if overlapping and timing.ok and not timing.burst:
            timing = replace(timing, burst=busy_reason(max(overlapping)))
        marked.append(timing)
    return marked
