"""A chart's y ticks: round values, evenly spaced in value and on the rows plotext puts them on, at every chart height."""

from __future__ import annotations

import math

import pytest
from plotext._utility import get_matrix_data  # where plotext puts a tick: the rows it draws, not a model of them

from tui.core.view.ticks import (
    COMPACT_MANTISSAS,
    MAX_TICKS,
    NICE_MANTISSAS,
    nice_step,
    tick_labels,
    y_axis,
)

ROWS_80x24, ROWS_120x40, ROWS_160x45 = 6, 23, 28
"""Canvas rows of the experiment screen's chart at 80×24 (where the prompt-length sweep read 75.2, 62.7, 50.2, 25.1,
12.5, 0.0), 120×40 and 160×45."""


def tick_rows(ticks, top, rows) -> list[int]:
    return get_matrix_data(list(ticks), [0, top], rows)


def assert_even(values) -> None:
    gaps = [b - a for a, b in zip(values, values[1:])]
    assert gaps and all(math.isclose(g, gaps[0], rel_tol=1e-9) for g in gaps), values


def is_round(step: float, mantissas) -> bool:
    mantissa = step / 10 ** math.floor(math.log10(step))
    return any(math.isclose(mantissa, m) for m in mantissas)


def test_plotexts_own_ticks_skip_one_on_the_80x24_chart():
    """The bug: seven ticks from 0 to 75.2 on six rows, two on one row (the label 37.6 overwritten)."""
    own = [75.2 * i / 6 for i in range(7)]
    assert len(set(tick_rows(own, 75.2, ROWS_80x24))) < len(own)


@pytest.mark.parametrize("rows", [ROWS_80x24, 7, ROWS_120x40, ROWS_160x45])
def test_the_0_to_75_axis_has_round_ticks_each_on_a_row_of_its_own_evenly_spaced(rows):
    axis = y_axis(75.2, rows)
    rows_drawn = tick_rows(axis.ticks, axis.top, rows)
    assert len(set(rows_drawn)) == len(axis.ticks) >= 2, "no two ticks on one row"
    assert_even(axis.ticks)
    assert_even(rows_drawn)
    assert rows_drawn[0] == 0 and rows_drawn[-1] <= rows - 1
    assert axis.top >= 75.2 and axis.ticks[-1] <= axis.top
    assert is_round(axis.step, NICE_MANTISSAS) and all(math.isclose(t / axis.step, round(t / axis.step)) for t in axis.ticks)


def test_the_80x24_axis_reads_0_to_100_by_twenties():
    axis = y_axis(75.2, ROWS_80x24)
    assert tick_labels(axis) == ("0", "20", "40", "60", "80", "100")


@pytest.mark.parametrize("mantissas", [NICE_MANTISSAS, COMPACT_MANTISSAS])
@pytest.mark.parametrize("rows", [2, 3, 4, 5, 6, 9, 12, 23, 28, 40])
@pytest.mark.parametrize("highest", [0.0049, 0.3, 1.0, 7.3, 68.4, 214.0, 3685.0, 5828.4, 12_345.0, 1.7e300])
def test_every_axis_holds_its_values_with_round_ticks_evenly_on_rows(highest, rows, mantissas):
    axis = y_axis(highest, rows, mantissas)
    rows_drawn = tick_rows(axis.ticks, axis.top, rows)
    assert axis.top >= highest and axis.top < 2.5 * highest, "the data fill at least 40 % of the axis"
    assert 2 <= len(axis.ticks) <= MAX_TICKS
    assert len(set(rows_drawn)) == len(rows_drawn) and max(rows_drawn) <= rows - 1
    assert_even(rows_drawn)
    assert_even(axis.ticks)
    assert is_round(axis.step, mantissas)


def test_one_row_holds_zero_alone():
    axis = y_axis(7.0, 1)
    assert axis.ticks == (0.0,) and axis.top >= 7.0


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan])
def test_an_axis_needs_a_value_above_zero(bad):
    with pytest.raises(ValueError):
        y_axis(bad, 6)


@pytest.mark.parametrize(("at_least", "step"), [(0.3, 0.5), (1.0, 1.0), (2.01, 2.5), (0.2, 0.2), (13.7, 20.0),
                                                (40.0, 50.0), (60.0, 100.0), (1228.0, 2000.0)])
def test_nice_step_is_the_least_round_step_at_least_the_value(at_least, step):
    assert nice_step(at_least) == pytest.approx(step)


def test_labels_carry_the_decimals_their_step_needs():
    assert tick_labels(y_axis(12.3, ROWS_120x40)) == ("0.0", "2.5", "5.0", "7.5", "10.0", "12.5")
    assert tick_labels(y_axis(0.3, 5)) == ("0.0", "0.1", "0.2", "0.3", "0.4")
    assert tick_labels(y_axis(5828.4, 4)) == ("0", "2,000", "4,000", "6,000")


def test_compact_labels_fit_four_columns():
    for highest in (3.3, 214.0, 3685.0, 12_345.0, 140_000.0, 1.5e6, 9.9e8, 5e10):
        for rows in (3, 5, 7, 12):
            labels = tick_labels(y_axis(highest, rows, COMPACT_MANTISSAS), compact=True)
            assert all(len(label) <= 4 for label in labels), labels
    assert tick_labels(y_axis(14_000.0, 4, COMPACT_MANTISSAS), compact=True) == ("0", "5k", "10k", "15k")
    assert tick_labels(y_axis(1.7e300, 3, COMPACT_MANTISSAS), compact=True)[-1].endswith("e+300")
