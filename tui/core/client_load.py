"""Is phasetop itself the bottleneck? Its own CPU, and the requests it timed while it was near a core.

The UI reads the streams on a thread of its own, but that thread shares the GIL with rendering: when the
process is near one core, a chunk can wait for the GIL before it is stamped, and the stamps time the
client, not the server. Requests that ran while it was that busy are marked (as the measurement guard of
`tui.core.delivery` marks clumped ones) and kept out of findings and the diagnosis.
"""

from __future__ import annotations

from dataclasses import replace

from tui.core.records import RequestTiming

CLIENT_BUSY_PCT = 85.0
"""Percent of one core at which the client counts as busy: past it, reading and rendering queue for the GIL."""


def busy_line(cpu_pct: float) -> str:
    """What the UI shows while the client is busy."""
    return f"client busy: {cpu_pct:.0f} % CPU, figures marked"


def busy_reason(cpu_pct: float) -> str:
    """The `burst` reason of a request timed while the client was busy."""
    return f"the client was busy ({cpu_pct:.0f} % of a core) while this request streamed: its stamps may time its own reading"


class ClientLoad:
    """The client's CPU as last sampled, and the latest busy sample. Written by one thread, read by any:
    each read is of plain attributes (a float, a tuple), so none sees half an update."""

    def __init__(self, busy_pct: float = CLIENT_BUSY_PCT) -> None:
        self.busy_pct = busy_pct
        self.cpu_pct: float | None = None
        """The latest sample: percent of one core over its interval."""
        self._last_busy: tuple[float, float] | None = None
        """(unix time the busy interval ended, its CPU %) of the latest busy sample."""

    def sample(self, cpu_pct: float, t_unix: float) -> None:
        """A sample over the interval that ended at `t_unix`."""
        self.cpu_pct = cpu_pct
        if cpu_pct >= self.busy_pct:
            self._last_busy = (t_unix, cpu_pct)

    @property
    def busy(self) -> bool:
        return self.cpu_pct is not None and self.cpu_pct >= self.busy_pct

    def busy_since(self, t_unix: float) -> float | None:
        """The CPU % of a busy interval that ended after `t_unix` (a request sent then overlapped it); None if none did."""
        last = self._last_busy
        return last[1] if last is not None and last[0] > t_unix else None

    def mark(self, timing: RequestTiming) -> RequestTiming:
        """The timing with `burst` set when the client was busy while it streamed (an existing reason is kept)."""
        cpu_pct = self.busy_since(timing.t_sent_unix)
        if cpu_pct is None or timing.burst or not timing.ok:
            return timing
        return replace(timing, burst=busy_reason(cpu_pct))


BusyInterval = tuple[float, float, float]
"""(start unix, end unix, CPU % of one core) of an interval in which the client was busy."""


def mark_busy(timings: list[RequestTiming], intervals: list[BusyInterval]) -> list[RequestTiming]:
    """After a run: each timing that streamed during a busy interval gets `burst` set (an existing reason
    is kept); the CLI's twin of `ClientLoad.mark`, which marks as requests end."""
    marked = []
    for timing in timings:
        end = timing.t_sent_unix + (timing.e2e_s or 0.0)
        overlapping = [pct for start, stop, pct in intervals if start < end and stop > timing.t_sent_unix]
        if overlapping and timing.ok and not timing.burst:
            timing = replace(timing, burst=busy_reason(max(overlapping)))
        marked.append(timing)
    return marked
