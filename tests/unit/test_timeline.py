import pytest

from tui.core.records import RequestTiming
from tui.core.timeline import lanes, thin


def test_lanes_share_one_axis_from_the_earliest_send():
    a = RequestTiming(True, 100.0, (0.5, 0.6))
    b = RequestTiming(True, 100.25, (0.1, 0.2, 0.3))
    la, lb = lanes([a, b], ["short", "long"])
    assert la.sent_s == 0 and la.first_token_s == 0.5 and la.token_s == (0.5, 0.6)
    assert lb.sent_s == 0.25
    assert lb.first_token_s == pytest.approx(0.35) and lb.token_s == pytest.approx((0.35, 0.45, 0.55))
    assert (la.label, lb.label) == ("short", "long")


def test_only_the_last_requests_are_kept_and_origin_moves():
    timings = [RequestTiming(True, float(i), (0.1,)) for i in range(10)]
    shown = lanes(timings, keep=3)
    assert [l.label for l in shown] == ["#1", "#2", "#3"]
    assert [l.sent_s for l in shown] == [0.0, 1.0, 2.0]


def test_request_in_prefill_has_no_first_token():
    [lane] = lanes([RequestTiming(False, 5.0, ())])
    assert lane.first_token_s is None and lane.token_s == () and not lane.ok


def test_no_requests_no_lanes():
    assert lanes([]) == []


def test_thin_keeps_every_cell_that_had_a_tick_and_few_points_per_cell():
    ticks = [i * 0.001 for i in range(5000)]  # 5,000 ticks over 5 s
    kept = thin(ticks, 0.0, 5.0, cells=100)
    assert len(kept) <= 100 * 4 + 1 and kept[0] == ticks[0] and kept[-1] == ticks[-1]
    assert {int(t / 0.05) for t in kept} == {int(t / 0.05) for t in ticks}  # the cells shown are the same


def test_thin_leaves_a_short_lane_alone():
    ticks = [0.1, 0.2, 0.3]
    assert thin(ticks, 0.0, 1.0, cells=80) == ticks
