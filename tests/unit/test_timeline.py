from dataclasses import replace

import pytest

from tui.core.measure.records import RequestTiming
from tui.core.view.timeline import (
    ALIGNED,
    WALL_CLOCK,
    Lane,
    axis_cells,
    axis_range,
    batches,
    default_view,
    keep_count,
    lane_label,
    lanes,
    layout,
    with_selected,
)


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
    assert [l.label for l in shown] == ["#8", "#9", "#10"]
    assert [l.sent_s for l in shown] == [0.0, 1.0, 2.0]


def test_request_in_prefill_has_no_first_token():
    [lane] = lanes([RequestTiming(False, 5.0, ())])
    assert lane.first_token_s is None and lane.token_s == () and not lane.ok


def test_no_requests_no_lanes():
    assert lanes([]) == []


# ---- views and layout ---------------------------------------------------------------------------------


def offsets(ttft_s, itl_s=0.01, count=50):
    return tuple(ttft_s + i * itl_s for i in range(count))


def short_then_long():
    """Three single sends, seconds apart: short (8 ms prefill), long (79 ms), short."""
    timings = [RequestTiming(True, 100.0, offsets(0.008)), RequestTiming(True, 110.0, offsets(0.079)),
               RequestTiming(True, 120.0, offsets(0.008))]
    return timings, ["short", "long", "short"]


def test_a_batch_is_the_requests_sent_at_once():
    timings = [RequestTiming(True, 100.0 + i * 0.03, ()) for i in range(8)]  # 0.21 s from first to last
    timings += [RequestTiming(True, 100.3, ()), RequestTiming(True, 105.0, ()), RequestTiming(True, 105.1, ())]
    assert batches(timings) == [0] * 8 + [1, 2, 2]
    assert batches([RequestTiming(True, 1.0, ()), RequestTiming(True, 2.0, ())]) == [0, 1]
    assert batches([]) == []


def test_the_load_dials_lanes_are_each_a_batch_by_themselves_however_close_they_arrive():
    timings = [RequestTiming(True, 100.0 + i * 0.05, ()) for i in range(5)]
    assert batches(timings) == [0] * 5
    assert batches(timings, alone={1, 2}) == [0, 1, 2, 3, 3], "a lane after a lone one starts a batch of its own"


@pytest.mark.parametrize(("batch_of", "view"), [([], ALIGNED), ([0, 1, 2], ALIGNED), ([0, 1, 1], WALL_CLOCK),
                                                 ([0, 0, 1], ALIGNED)])
def test_a_batch_defaults_to_wall_clock_a_single_send_to_aligned(batch_of, view):
    ended = [RequestTiming(True, 100.0 + i * 0.1, (0.05,), output_tokens=1) for i in range(len(batch_of))]
    assert default_view(ended, batch_of) == view


def test_a_single_send_among_requests_still_running_defaults_to_wall_clock():
    streams = [RequestTiming(True, 100.0 + i * 0.001, (0.05, 0.06)) for i in range(8)]  # in flight: not ended
    long = RequestTiming(True, 100.5, ())
    assert default_view([*streams, long], batches([*streams, long])) == WALL_CLOCK
    ended = [RequestTiming(True, 100.0 + i * 0.001, (0.05, 0.1), output_tokens=2) for i in range(8)]
    assert default_view([*ended, long], batches([*ended, long])) == ALIGNED, "they ended before it was sent"
    late = [RequestTiming(True, 100.0, (0.05, 0.6), output_tokens=2)]  # ended, but after the long was sent
    assert default_view([*late, long], batches([*late, long])) == WALL_CLOCK
    failed = [RequestTiming(False, 100.0, (), error="refused")]
    assert default_view([*failed, long], batches([*failed, long])) == ALIGNED
    after = RequestTiming(True, 100.7, ())  # sent after the long one and still running: nothing it landed among
    timings = [*ended, long, after]
    assert default_view(timings, batches(timings, alone={9}), sent=8) == ALIGNED


def test_the_last_batch_is_kept_whole_beyond_the_lane_limit():
    assert keep_count([0, 1] + [2] * 40, keep=32) == 40
    assert keep_count([0] * 5 + [1] * 8, keep=6) == 8
    assert keep_count(list(range(50)), keep=32) == 32
    assert keep_count([], keep=32) == 0


def test_aligned_starts_every_lane_at_its_send_and_zooms_to_the_longest():
    timings, labels = short_then_long()
    drawn = layout(lanes(timings, labels), ALIGNED, rows=10, width=80)
    assert [row.sent_s for row in drawn.rows] == [0.0, 0.0, 0.0]
    assert drawn.x_min == 0.0 and drawn.x_max == pytest.approx(0.079 + 0.49), "the longest lane, not 20 s"
    short, long, _ = drawn.rows
    assert drawn.span_cells(long) >= 5 * drawn.span_cells(short)


def test_wall_clock_spans_the_lanes_in_view():
    timings, labels = short_then_long()
    drawn = layout(lanes(timings, labels), WALL_CLOCK, rows=10, width=80, batch_of=batches(timings))
    assert [row.sent_s for row in drawn.rows] == [0.0, 10.0, 20.0]
    assert (drawn.x_min, drawn.x_max) == pytest.approx((0.0, 20.0 + 0.008 + 0.49))


def test_wall_clock_zooms_to_the_last_batch_and_leaves_older_lanes_off_the_axis():
    timings = [RequestTiming(True, 90.0, offsets(0.01))] + [RequestTiming(True, 100.0 + i * 0.002, offsets(0.02 + i * 0.01))
                                                            for i in range(8)]
    labels = ["short"] + ["8 at once"] * 8
    batch_of = batches(timings)
    drawn = layout(lanes(timings, labels, keep=9), WALL_CLOCK, rows=20, width=100, batch_of=batch_of)
    assert drawn.x_min == pytest.approx(10.0) and drawn.x_max == pytest.approx(10.014 + 0.09 + 0.49)
    old = drawn.rows[0]
    assert old.prefill is None and old.ticks == ()
    assert all(row.prefill is not None and row.ticks for row in drawn.rows[1:])
    assert axis_range([], WALL_CLOCK) == (0.0, 1.0)


@pytest.mark.parametrize("width", [40, 80, 200])
def test_a_prefill_span_is_never_thinner_than_one_cell(width):
    timings = [RequestTiming(True, 100.0, offsets(0.0001, 0.1, 100))]  # 0.1 ms prefill on a 10 s lane
    drawn = layout(lanes(timings, ["tiny"]), ALIGNED, rows=5, width=width)
    [row] = drawn.rows
    assert drawn.span_cells(row) == pytest.approx(1.0)
    assert drawn.cells == axis_cells(width, [row.lane]) and drawn.cells < width
    assert row.label == "tiny 0.1 ms", "the TTFT, which no span this short can hold, is in the label"


def test_the_newest_lanes_that_fit_are_shown_and_the_rest_counted():
    timings = [RequestTiming(True, 100.0 + i * 0.001, offsets(0.02)) for i in range(8)]
    drawn = layout(lanes(timings, ["8 at once"] * 8), WALL_CLOCK, rows=5, width=80)
    assert len(drawn.rows) == 5 and drawn.hidden == 3
    assert layout(lanes(timings), ALIGNED, rows=0, width=80).hidden == 7, "at least one lane"


def test_a_lane_in_prefill_or_failed_is_labelled_so():
    assert lane_label(Lane("long", 0.0, None, ())) == "long …"
    assert lane_label(Lane("long", 0.0, None, (), ok=False)) == "long failed"
    assert lane_label(Lane("long", 1.0, 1.25, (1.25,))) == "long 250 ms"
    [row] = layout([Lane("long", 0.0, None, ())], ALIGNED, rows=3, width=80).rows
    assert row.prefill is None and row.ticks == ()


def test_bursts_are_marked_on_the_lane():
    [lane] = lanes([RequestTiming(True, 1.0, (0.1, 0.1), burst="arrived in 1 clump")])
    assert lane.burst


def test_the_selected_lane_is_marked_and_its_labels_width_counted():
    from tui.core.measure.records import RequestTiming
    from tui.core.view.timeline import SELECTED_MARK
    timings = [RequestTiming(ok=True, t_sent_unix=float(i), token_offsets_s=(0.02, 0.03)) for i in range(3)]
    kept = with_selected(lanes(timings, ["a", "b", "c"], keep=3), 1)
    assert [lane.selected for lane in kept] == [False, True, False]
    drawn = layout(kept, ALIGNED, rows=5, width=80)
    assert [row.tick_label for row in drawn.rows] == ["  a 20 ms", SELECTED_MARK + "b 20 ms", "  c 20 ms"]
    assert [row.label for row in drawn.rows] == ["a 20 ms", "b 20 ms", "c 20 ms"]
    assert drawn.cells == 80 - len(SELECTED_MARK + "a 20 ms") - 1


def test_the_rows_scroll_up_to_a_selected_lane_older_than_those_that_fit():
    timings = [RequestTiming(True, 100.0 + i * 0.001, offsets(0.05, count=5)) for i in range(32)]
    labels = [f"stream {i + 1}" for i in range(32)]
    newest = layout(with_selected(lanes(timings, labels, keep=32), 31), WALL_CLOCK, rows=10, width=100)
    assert [r.lane.label for r in newest.rows] == labels[-10:] and (newest.hidden, newest.newer) == (22, 0)
    middle = layout(with_selected(lanes(timings, labels, keep=32), 15), WALL_CLOCK, rows=10, width=100)
    assert middle.rows[0].lane.label == "stream 16" and (middle.hidden, middle.newer) == (15, 7)
    top = layout(with_selected(lanes(timings, labels, keep=32), 0), WALL_CLOCK, rows=10, width=100)
    assert top.rows[0].lane.label == "stream 1" and (top.hidden, top.newer) == (0, 22)
    assert top.x_min == 0.0, "the axis starts at the first send drawn"


def test_a_disaggregated_request_is_prefill_then_kv_transfer_then_decode():
    from tui.core.measure.records import ServerSplit

    moved = RequestTiming(True, 100.0, offsets(0.100), server_split=ServerSplit(kv_transfer_s=0.030))
    plain = RequestTiming(True, 100.0, offsets(0.100))
    [lane, colocated] = lanes([moved, plain])
    assert lane.transfer_s == 0.030 and colocated.transfer_s is None
    drawn = layout([lane, colocated], ALIGNED, rows=10, width=200)
    three, two = drawn.rows
    assert three.prefill == pytest.approx((0.0, 0.070)), "prefill ends where the KV starts to move"
    assert three.transfer == pytest.approx((0.070, 0.100)), "the move ends at the first token"
    assert three.ticks[0] == pytest.approx(0.100)
    assert two.prefill == pytest.approx((0.0, 0.100)) and two.transfer is None


def test_a_transfer_shorter_than_a_cell_is_still_one_cell_and_one_longer_than_ttft_starts_at_the_send():
    from tui.core.measure.records import ServerSplit

    quick = RequestTiming(True, 100.0, offsets(0.100, count=400), server_split=ServerSplit(kv_transfer_s=0.0001))
    drawn = layout(lanes([quick]), ALIGNED, rows=10, width=60)
    [row] = drawn.rows
    assert row.transfer[1] - row.transfer[0] == pytest.approx(drawn.cell_s)
    odd = RequestTiming(True, 100.0, offsets(0.010), server_split=ServerSplit(kv_transfer_s=0.5))
    [row] = layout(lanes([odd]), ALIGNED, rows=10, width=200).rows
    assert row.transfer[0] == 0.0, "never before its send"


def test_a_moved_selection_marks_the_same_lanes_and_keeps_their_judged_gaps():
    streams = [RequestTiming(True, 100.0 + i * 0.001, (0.05, 0.06, 0.07, 0.08, 0.09, 0.40, 0.41)) for i in range(3)]
    judged = lanes(streams, ["a", "b", "c"], keep=3)
    moved = with_selected(judged, 1)
    assert [replace(lane, selected=False) for lane in moved] == judged, "the same lanes, only the mark moved"
    assert [lane.selected for lane in moved] == [False, True, False]
    assert moved[0] is judged[0] and moved[1].gaps is judged[1].gaps, "nothing judged again"
    assert [lane.selected for lane in with_selected(moved, None)] == [False, False, False]
