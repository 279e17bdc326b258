"""A chart's y axis from zero: round ticks (a step of 1, 2, 2.5 or 5 × 10^k) the same number of rows apart.

plotext left to itself spreads seven ticks over the axis' range (0, 1/6, 2/6 … of it): labels like 12.5, 25.1, 37.6,
and on a chart of fewer rows than ticks two land on one row and the later label hides the other (0–75.2 on six
rows drew 75.2, 62.7, 50.2, 25.1, 12.5, 0.0). A tick of value v is drawn on row ⌊½ + (rows − 1) · v / top⌋, so ticks
a round step apart are also a whole number of rows apart only where the axis' top is that step times
(rows − 1) / rows-per-tick: the top is chosen so, the least such top that holds the highest value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

NICE_MANTISSAS = (1.0, 2.0, 2.5, 5.0)
"""The steps between ticks, times a power of ten."""
COMPACT_MANTISSAS = (1.0, 2.0, 5.0)
"""Steps whose every multiple fits four characters with a k or M ("15k", "1.5M"; 2.5 would make "12.5k")."""
MAGNITUDE_ONLY = 1e12
"""Ticks this high are labelled by their magnitude ("2e+12"): a server's absurd figure, not one to read in digits."""
MAX_TICKS = 7
"""At most this many ticks on an axis, as plotext's own default draws."""
TWO_TICKS_COST = 1.25
"""Zero and one tick hardly make a scale: such an axis is taken only where three ticks would leave a quarter more
of the rows empty above the data."""


@dataclass(frozen=True, slots=True)
class YAxis:
    """A y axis from zero to `top`, with its ticks and the step between them."""

    top: float
    ticks: tuple[float, ...]
    step: float
    rows_per_tick: int
    """Canvas rows from one tick to the next."""


def y_axis(highest: float, rows: int, mantissas: Sequence[float] = NICE_MANTISSAS, max_ticks: int = MAX_TICKS) -> YAxis:
    """The axis for values up to `highest` (> 0) on a chart of `rows` canvas rows: of the tops that put at most
    `max_ticks` round ticks evenly on rows, the least that holds `highest` (a top with two ticks, zero and one,
    counted `TWO_TICKS_COST` times as high), and more ticks where two tops tie."""
    if not highest > 0 or not math.isfinite(highest):
        raise ValueError(f"an axis needs a finite highest value above 0, got {highest}")
    span = rows - 1
    if span < 1:  # one row: zero alone
        step = nice_step(highest, mantissas)
        return YAxis(step, (0.0,), step, 0)
    axes = [_axis(highest, span, r, mantissas) for r in range(1, span + 1) if span // r + 1 <= max_ticks]
    return min(axes, key=lambda a: (a.top * (TWO_TICKS_COST if len(a.ticks) < 3 else 1.0), -len(a.ticks)))


def nice_step(at_least: float, mantissas: Sequence[float] = NICE_MANTISSAS) -> float:
    """The least of mantissa × 10^k that is at least `at_least` (> 0)."""
    power = math.floor(math.log10(at_least))
    steps = (mantissa * 10.0 ** exponent for exponent in (power, power + 1) for mantissa in mantissas)
    return next(step for step in steps if step >= at_least * (1 - 1e-12))  # 10 ** k is inexact for k < 0


def tick_labels(axis: YAxis, compact: bool = False) -> tuple[str, ...]:
    """Each tick as text, with the decimals its step needs ("0.0", "2.5", "5.0"; "1,000"); `compact`: in a unit of
    thousands, millions or billions where the axis reaches them ("10k", "1.5M"), for labels of four columns."""
    if max(axis.ticks) >= MAGNITUDE_ONLY:
        return tuple("0" if tick == 0 else f"{tick:.2g}" for tick in axis.ticks)
    unit, suffix = _unit(max(axis.ticks)) if compact else (1.0, "")
    decimals = _decimals(axis.step / unit)
    separator = "" if compact else ","
    return tuple("0" if compact and tick == 0 else f"{tick / unit:{separator}.{decimals}f}{suffix}" for tick in axis.ticks)


def _axis(highest: float, span: int, rows_per_tick: int, mantissas: Sequence[float]) -> YAxis:
    step = nice_step(highest * rows_per_tick / span, mantissas)
    count = span // rows_per_tick + 1
    digits = _decimals(step) + 1  # i × step carries float noise (3 × 0.2 = 0.6000000000000001)
    ticks = tuple(round(i * step, digits) for i in range(count))
    return YAxis(step * span / rows_per_tick, ticks, step, rows_per_tick)


def _decimals(step: float) -> int:
    """Decimals that show every multiple of `step` exactly: 0 for 5 or 20, 1 for 0.5 or 2.5, 2 for 0.25."""
    for decimals in range(0, 16):
        scaled = step * 10 ** decimals
        if abs(scaled - round(scaled)) < 1e-9 * max(1.0, scaled):
            return decimals
    return 16


def _unit(largest: float) -> tuple[float, str]:
    if largest >= 1e9:
        return 1e9, "G"
    if largest >= 1e6:
        return 1e6, "M"
    if largest >= 1e4:
        return 1e3, "k"
    return 1.0, ""
