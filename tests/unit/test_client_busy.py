"""The client-busy guard: the requests a meter timed while it was near a core are marked."""

from __future__ import annotations

from tui.core.measure.client_load import mark_busy
from tui.core.measure.records import RequestTiming


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
