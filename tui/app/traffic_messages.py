"""Facts the trace receiver's worker posts: the requests a server served (its spans), and what it took in."""

from __future__ import annotations

from tui.app.messages import Fact, LatestFact
from tui.core.telemetry.served import ServedRequest, ServerSpan, Tally


class TracesReceived(Fact):
    """One export's served requests and start-up spans, and the receiver's counts after it (every one counts: not
    a sample to drop)."""

    def __init__(self, records: tuple[ServedRequest, ...], server_spans: tuple[ServerSpan, ...], tally: Tally,
                 last_refusal: str | None) -> None:
        super().__init__()
        self.records = records
        self.server_spans = server_spans
        self.tally = tally
        self.last_refusal = last_refusal


class TracesTallied(LatestFact):
    """The receiver's counts when no request came with them (an export refused, or one with no request in it)."""

    def __init__(self, tally: Tally, last_refusal: str | None) -> None:
        super().__init__()
        self.tally = tally
        self.last_refusal = last_refusal


class TraceReceiverStopped(Fact):
    """The receiver stopped serving (its socket failed): nothing more will arrive."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason
