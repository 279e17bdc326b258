"""A lane as character cells: what each cell of the timeline's axis holds, so that no cell lies.

A decode cell says how many tokens fell in it (`DECODE` with a level against the view's typical count per
cell). A cell with no token in it says why: the lane was decoding through it (the gap around it is no longer
than the lane's typical gap), the lane stopped there for a gap long enough to name and whose it is (`SERVER`,
`CLIENT`, `UNKNOWN`: `tui.core.measure.gaps`), or, empty, the lane read nothing for longer than its typical gap.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from tui.core.measure.gaps import CLIENT, SERVER, UNKNOWN, Gap

EMPTY = ""
PREFILL = "prefill"
TRANSFER = "transfer"
SENT = "sent"
"""Sent, no token yet."""
FAILED = "failed"
"""Failed before its first token."""
DECODE = "decode"
BURST = "burst"
"""Decode arrivals flagged as clumped by delivery: they time the delivery, not the generation."""
THROUGH = "through"
"""No token in this cell, but the gap around it is a typical one: the lane was decoding through it."""
GAP_KINDS = {SERVER: "gap-server", CLIENT: "gap-client", UNKNOWN: "gap-unknown"}
"""A named gap's cells, by its cause."""

LEVEL_BOUNDS = (0.25, 0.5, 0.75, 4 / 3, 5 / 3, 2.0, 3.0)
"""A decode cell's level (1 to 8) by its tokens over the view's typical count per cell: 1 below a quarter of it,
4 (half height) from three quarters to a third more, and 8 at three times it (a clump)."""
TYPICAL_LEVEL = 4
TOKEN_SLACK = 1
"""A cell within a token of the typical count is typical too: zoomed in, where a cell holds one token or two,
a lane decoding steadily still draws one even line."""
THROUGH_FACTOR = 1.5
"""A gap up to this many times the lane's median is typical: the cells inside it are decoding through."""


@dataclass(frozen=True, slots=True)
class Cell:
    """One character cell of a lane: its kind, and for decode its level (1 to 8: `LEVEL_BOUNDS`)."""

    kind: str
    level: int = 0


def column(t: float, x_min: float, cell_s: float, cells: int) -> int:
    """The cell a time on the axis falls in."""
    return columns((t,), x_min, cell_s, cells)[0]


def columns(ticks: Sequence[float], x_min: float, cell_s: float, cells: int) -> list[int]:
    """The cell each of many times falls in, in one pass (a view of 32 lanes has some 16,000)."""
    last = cells - 1
    return [min(last, max(0, int((t - x_min) / cell_s))) for t in ticks]


def token_counts(ticks: Sequence[float], tokens: Sequence[int] | None, x_min: float, cell_s: float,
                 cells: int) -> Counter[int]:
    """Tokens in each cell: a chunk's arrival counts the tokens it carried (`tokens`, None: one each), so a chunk of
    several draws as that much decode, not one tick."""
    cols = columns(ticks, x_min, cell_s, cells)
    if tokens is None:
        return Counter(cols)
    counts: Counter[int] = Counter()
    for col, carried in zip(cols, tokens, strict=True):
        counts[col] += carried
    return counts


def tokens_per_cell(lanes: Sequence[tuple[Sequence[float], Sequence[int] | None]], x_min: float, cell_s: float,
                    cells: int) -> float:
    """The view's typical count of tokens in a cell a lane decodes through (the median over such cells, at least 1);
    `lanes` are each lane's arrivals on the axis and the tokens each carried (None: one each)."""
    counts: list[int] = []
    for ticks, tokens in lanes:
        per = token_counts(ticks, tokens, x_min, cell_s, cells)
        if per:  # a lane's first and last cells are partial
            edges = (min(per), max(per))
            counts.extend(n for col, n in per.items() if col not in edges)
    return max(1.0, median(counts)) if counts else 1.0


def lane_cells(
    token_s: Sequence[float],
    prefill: tuple[float, float] | None,
    transfer: tuple[float, float] | None,
    sent_s: float,
    gaps: Sequence[Gap],
    typical_gap_s: float | None,
    *,
    ok: bool,
    burst: bool,
    x_min: float,
    x_max: float,
    cells: int,
    per_cell: float,
    tokens_per_chunk: Sequence[int] | None = None,
) -> tuple[Cell, ...]:
    """The lane's cells: decode, what lies between its tokens, then the prefill and transfer spans over them.

    `token_s` are its chunks' arrivals on the view's axis (all of them, on the axis or not: gap indices count them
    all), `tokens_per_chunk` the tokens each carried (None: one each), `gaps` its named gaps, `per_cell` the view's
    typical tokens per cell (`tokens_per_cell`)."""
    marks = [Cell(EMPTY)] * cells
    cell_s = (x_max - x_min) / cells
    on_axis = [(i, t) for i, t in enumerate(token_s) if x_min <= t <= x_max]
    if not on_axis:
        if not token_s and x_min <= sent_s <= x_max and (prefill is None or not ok):
            marks[column(sent_s, x_min, cell_s, cells)] = Cell(SENT if ok else FAILED)
    else:
        named = {gap.index: gap for gap in gaps}
        cols = columns([t for _, t in on_axis], x_min, cell_s, cells)
        carried = [tokens_per_chunk[i] for i, _ in on_axis] if tokens_per_chunk is not None else None
        counts = token_counts([t for _, t in on_axis], carried, x_min, cell_s, cells)
        for k, ((i, a), (_, b)) in enumerate(zip(on_axis, on_axis[1:])):
            first, last = cols[k] + 1, cols[k + 1]
            if first >= last:
                continue
            gap = named.get(i)
            if gap is not None:
                fill = Cell(GAP_KINDS[gap.cause])
            elif typical_gap_s is not None and b - a <= THROUGH_FACTOR * typical_gap_s:
                fill = Cell(THROUGH)
            else:
                fill = Cell(EMPTY)
            for col in range(first, last):
                marks[col] = fill
        for col, count in counts.items():
            marks[col] = Cell(BURST if burst else DECODE, level(count, per_cell))
    if prefill is not None:  # over the decode cells it shares: a prefill shorter than a cell still shows
        _fill(marks, prefill, Cell(PREFILL), x_min, cell_s)
    if transfer is not None:  # over the first decode cell too: a move shorter than a cell still shows
        _fill(marks, transfer, Cell(TRANSFER), x_min, cell_s)
    return tuple(marks)


def level(count: int, per_cell: float) -> int:
    """A decode cell's level (`LEVEL_BOUNDS`, `TOKEN_SLACK`)."""
    if abs(count - per_cell) <= TOKEN_SLACK:
        return TYPICAL_LEVEL
    return 1 + bisect_right(LEVEL_BOUNDS, count / per_cell)


def _fill(marks: list[Cell], span: tuple[float, float], cell: Cell, x_min: float, cell_s: float) -> None:
    """Every cell the span covers (a span is at least a cell wide: `timeline._span`)."""
    cells = len(marks)
    first = column(span[0], x_min, cell_s, cells)
    last = max(first, column(span[1] - cell_s * 1e-6, x_min, cell_s, cells))
    for col in range(first, last + 1):
        marks[col] = cell


def axis_ticks(x_min: float, x_max: float, cells: int, spacing: int = 10) -> list[tuple[int, str]]:
    """Tick columns and their labels, at a 1-2-5 step about every `spacing` cells: [(0, "0"), (12, "0.5"), …]."""
    span = x_max - x_min
    if span <= 0 or cells <= 0:
        return []
    rough = span * spacing / cells
    power = 10 ** math.floor(math.log10(rough))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= rough)
    decimals = max(0, -math.floor(math.log10(step)))
    ticks, value = [], math.ceil(x_min / step) * step
    while value <= x_max + step * 1e-9:
        col = round((value - x_min) / span * cells)
        if col < cells:
            ticks.append((col, f"{value:.{decimals}f}"))
        value += step
    return ticks
