"""Every cell of a lane says what it holds: tokens as density, decoding through, a named gap, or a real silence."""

from __future__ import annotations

import pytest

from tui.core.view.lane_cells import (DECODE, EMPTY, GAP_KINDS, PREFILL, SENT, THROUGH, axis_ticks, lane_cells,
                                 tokens_per_cell)
from tui.core.measure.records import RequestTiming
from tui.core.view.timeline import ALIGNED, WALL_CLOCK, batches, lanes, layout

T0 = 1_800_000_000.0


def stream(ttft_s: float, itl_s: float, count: int, sent: float = T0, skip: tuple[float, float] | None = None) -> RequestTiming:
    offsets, t = [], ttft_s
    while len(offsets) < count:
        if skip is None or not skip[0] < t < skip[1]:
            offsets.append(round(t, 6))
        t += itl_s
    return RequestTiming(True, sent, tuple(offsets), prompt_tokens=200, output_tokens=count)


@pytest.mark.parametrize("width", [60, 120, 160, 400])
def test_a_steady_lane_has_no_empty_cell_at_any_width(width):
    """Zoomed in, cells are narrower than a token's gap: those between two tokens decode through, never empty."""
    [row] = layout(lanes([stream(0.05, 0.01, 60)], ["steady"]), ALIGNED, rows=3, width=width).rows
    kinds = [cell.kind for cell in row.cells]
    first_token = kinds.index(DECODE)
    assert PREFILL in kinds[:first_token + 1]
    assert EMPTY not in kinds[first_token:], kinds
    assert {kind for kind in kinds[first_token:]} <= {DECODE, THROUGH}
    decoded = [cell.level for cell in row.cells if cell.kind == DECODE]
    assert set(decoded[1:-1]) == {4}, "one even line, one token a cell or several"


def test_a_steady_lane_draws_one_even_level_and_a_clump_draws_higher():
    steady = stream(0.0, 0.005, 400)
    [row] = layout(lanes([steady], ["s"]), ALIGNED, rows=3, width=100).rows
    inner = [cell.level for cell in row.cells[2:-2]]
    assert set(inner) == {4}, "a token more or less in a cell stays at the typical level"
    offsets = list(steady.token_offsets_s)
    clumped = RequestTiming(True, T0, tuple(offsets[:200] + [offsets[200]] * 30 + offsets[230:]))
    [row] = layout(lanes([clumped], ["c"]), ALIGNED, rows=3, width=100).rows
    assert max(cell.level for cell in row.cells) == 8


def test_a_named_gap_is_drawn_by_its_cause_and_a_short_silence_stays_empty():
    """Eight streams stop at once for 200 ms (one shared step): each lane's cells in it are the server's."""
    silent = (1.0, 1.2)
    streams = [stream(0.05, 0.01, 150, sent=T0 + k * 0.001, skip=silent) for k in range(8)]
    drawn = layout(lanes(streams, [f"8 at once {k + 1}" for k in range(8)]), WALL_CLOCK, rows=10, width=120,
                   batch_of=batches(streams))
    for row in drawn.rows:
        kinds = [cell.kind for cell in row.cells]
        assert GAP_KINDS["server"] in kinds and EMPTY not in kinds[kinds.index(DECODE):]
    # A lone stream stops for 2× its gap: too short to name, too long to be decoding through: empty.
    lone = RequestTiming(True, T0, tuple([i * 0.01 for i in range(50)] + [0.51 + i * 0.01 for i in range(50)]))
    [row] = layout(lanes([lone], ["lone"]), ALIGNED, rows=3, width=400).rows
    kinds = [cell.kind for cell in row.cells]
    assert EMPTY in kinds[kinds.index(DECODE):] and not set(GAP_KINDS.values()) & set(kinds)


def test_a_lane_with_no_token_shows_its_send_and_the_typical_count_is_at_least_one():
    cells = lane_cells((), None, None, 0.5, (), None, ok=True, burst=False, x_min=0.0, x_max=1.0, cells=10, per_cell=1.0)
    assert [cell.kind for cell in cells].count(SENT) == 1 and cells[5].kind == SENT
    assert tokens_per_cell([], 0.0, 0.1, 10) == 1.0
    assert tokens_per_cell([([0.01, 0.11, 0.12, 0.13, 0.21, 0.22, 0.23, 0.31], None)], 0.0, 0.1, 10) == 3


def test_axis_ticks_step_by_one_two_five():
    assert axis_ticks(0.0, 2.6, 100) == [(0, "0.0"), (19, "0.5"), (38, "1.0"), (58, "1.5"), (77, "2.0"), (96, "2.5")]
    assert [label for _, label in axis_ticks(0.0, 0.09, 90)] == [f"{v / 100:.2f}" for v in range(0, 9)]  # none at the end
    assert axis_ticks(0.0, 0.0, 10) == [] and axis_ticks(0.0, 1.0, 0) == []
