"""Facts the fleet screen's worker posts: a fleet read through Prometheus, or why it could not be read."""

from __future__ import annotations

from tui.app.messages import LatestFact
from tui.core.fleet.instances import Fleet


class FleetRead(LatestFact):
    """Every instance Prometheus knows (those the filter matches), read at `fleet.t_unix`. Latest wins."""

    def __init__(self, fleet: Fleet, reading: int, started: float) -> None:
        super().__init__()
        self.fleet = fleet
        self.reading = reading
        """Which poll posted it (the screen starts a new one when the filter changes): an older one's answer is dropped."""
        self.started = started
        """`time.monotonic()` when the read began: the screen measures read-to-shown from it."""


class FleetUnreadable(LatestFact):
    """Prometheus did not answer (nothing listening, 5xx, garbage, refused credentials). Latest wins."""

    def __init__(self, reason: str, since_unix: float, reading: int) -> None:
        super().__init__()
        self.reason = reason
        """One line: what happened, naming Prometheus's URL (credentials redacted)."""
        self.since_unix = since_unix
        self.reading = reading
