"""Timeline lanes: each request as a prefill span then decode ticks, in two views (aligned at each send, or
one wall clock), with the layout arithmetic: which lanes fit, the axis each view zooms to, spans ≥ one cell,
and each lane's character cells (`tui.core.view.lane_cells`: decode as density, every stall named with its cause).
A disaggregated server's request has a third phase between them: its KV cache's move to the decode worker."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from tui.core.measure.gaps import Gap, attribute, typical_gap_s
from tui.core.measure.records import RequestTiming, same_requests
from tui.core.view.lane_cells import Cell, lane_cells, tokens_per_cell


@dataclass(frozen=True, slots=True)
class Lane:
    """One request on the shared axis; times are seconds after the earliest send shown."""

    label: str
    sent_s: float
    first_token_s: float | None
    """End of the prefill span (TTFT after `sent_s`); None while prefill is still running."""
    token_s: tuple[float, ...]
    """Arrival of every content chunk, on the shared axis."""
    ok: bool = True
    burst: bool = False
    """Its arrivals were flagged as clumped by delivery (they time the delivery, not the generation)."""
    selected: bool = False
    """The lane the figures under the chart speak of (arrow keys move it): its label is marked."""
    transfer_s: float | None = None
    """How long its KV cache took to move from the prefill worker to the decode worker (the server's split), the
    end of its time to first token; None where nothing moved or the server does not say."""
    gaps: tuple[Gap, ...] = ()
    """Its gaps long enough to name, each with its cause (`tui.core.measure.gaps`), judged against the other lanes."""
    typical_gap_s: float | None = None
    """Its median gap (the client's own left out): a cell inside a gap no longer than about this is decoding through."""
    tokens_per_chunk: tuple[int, ...] | None = None
    """The tokens each arrival carried (None: one each): a chunk of several draws as that much decode."""


def lanes(timings: Sequence[RequestTiming], labels: Sequence[str] | None = None, keep: int = 8) -> list[Lane]:
    """The last `keep` requests as lanes on one axis whose zero is the earliest send among them, each with its named
    gaps, judged against every request given (an older one's prefill can still hold a kept stream); none selected
    (`with_selected` marks one). Without labels, each is numbered in `timings`."""
    names = list(labels) if labels is not None else [f"#{i + 1}" for i in range(len(timings))]
    first = max(len(timings) - keep, 0)
    shown, shown_labels = list(timings)[first:], names[first:]
    if not shown:
        return []
    origin = min(t.t_sent_unix for t in shown)
    named = attribute(timings, names, last=len(shown))
    result = []
    for index, (timing, label) in enumerate(zip(shown, shown_labels, strict=True)):
        sent = timing.t_sent_unix - origin
        ticks = tuple(sent + offset for offset in timing.token_offsets_s)
        transfer = timing.server_split.kv_transfer_s if timing.server_split is not None else None
        result.append(Lane(label, sent, ticks[0] if ticks else None, ticks, timing.ok, bool(timing.burst),
                           transfer_s=transfer, gaps=named[index], typical_gap_s=typical_gap_s(timing),
                           tokens_per_chunk=timing.tokens_per_chunk))
    return result


def with_selected(shown: Sequence[Lane], selected: int | None) -> list[Lane]:
    """The same lanes with `selected` (an index into them) marked: a selection that moved judges no gap again."""
    return [lane if lane.selected == (index == selected) else replace(lane, selected=index == selected)
            for index, lane in enumerate(shown)]


class LaneJudge:
    """Makes the kept requests' lanes, judging their gaps again only when the requests or their labels change:
    an arrow key only moves the selection, and 32 streams' gaps take milliseconds to judge. One judge serves the
    timeline and the diagnosis alike, so both name the same cause for a gap."""

    def __init__(self) -> None:
        self._made: tuple[list[RequestTiming], list[str], int, list[Lane]] = ([], [], 0, [])

    def lanes(self, timings: Sequence[RequestTiming], labels: Sequence[str], keep: int) -> list[Lane]:
        """The last `keep` of `timings` as lanes (`lanes`)."""
        made_of, made_labels, made_keep, made = self._made
        if not same_requests(timings, made_of) or list(labels) != made_labels or keep != made_keep:
            made = lanes(timings, labels, keep)
            self._made = (list(timings), list(labels), keep, made)
        return made


# ---- views and layout ---------------------------------------------------------------------------------

ALIGNED = "aligned"
"""Every lane starts at its own send: prefill spans compare directly."""
WALL_CLOCK = "wall clock"
"""One shared axis: batching, and a long prompt landing among streams, show."""
VIEWS = (ALIGNED, WALL_CLOCK)

BATCH_GAP_S = 0.25
"""Requests sent within this long of the first of them are one batch (one key sent them, or they overlap
from their start anyway)."""
SELECTED_MARK = "› "
"""Before the selected lane's label (plain text: the chart's labels are not markup)."""
KEEP_LANES = 32
"""Lanes kept (more when the last batch is bigger: it stays whole); those that do not fit the plot's rows
are counted on the pane's border ("+N more")."""
MIN_AXIS_S = 0.01
"""The shortest axis drawn: a lane still in prefill has no length yet."""


def batches(timings: Sequence[RequestTiming], alone: Collection[int] = ()) -> list[int]:
    """One batch number per timing (0 for the first): a new batch starts with a send more than `BATCH_GAP_S`
    after the current batch's first send (one key sends a batch at once; its lanes are labelled "8 at once 1",
    "8 at once 2", …, so the label does not tell). Timings are oldest first. The timings at the indexes in
    `alone` are no key's batch (the load dial's, arriving at random): each is a batch by itself."""
    result: list[int] = []
    batch, first_sent, single = -1, 0.0, False
    for index, timing in enumerate(timings):
        if batch < 0 or single or index in alone or timing.t_sent_unix - first_sent > BATCH_GAP_S:
            batch, first_sent, single = batch + 1, timing.t_sent_unix, index in alone
        result.append(batch)
    return result


def keep_count(batch_of: Sequence[int], keep: int) -> int:
    """How many of the newest timings to keep: `keep`, or more to keep the last batch whole."""
    if not batch_of:
        return 0
    last = batch_of[-1]
    whole = sum(1 for b in batch_of if b == last)
    return min(len(batch_of), max(keep, whole))


def default_view(timings: Sequence[RequestTiming], batch_of: Sequence[int], sent: int = -1) -> str:
    """The view for the send at index `sent` (the newest by default): wall clock when it was a batch (several at
    once) or landed among requests still running (a long prompt among streams: what it does to them shows on one
    clock), else aligned."""
    if not batch_of:
        return ALIGNED
    sent %= len(timings)
    if batch_of.count(batch_of[sent]) > 1:
        return WALL_CLOCK
    sent_unix = timings[sent].t_sent_unix
    before = [t for n, t in enumerate(timings) if n != sent and t.t_sent_unix <= sent_unix]
    return WALL_CLOCK if any(_running_at(timing, sent_unix) for timing in before) else ALIGNED


def _running_at(timing: RequestTiming, t_unix: float) -> bool:
    """Still streaming at `t_unix`: not ended yet (a record still in flight has no output count; a failed one
    has ended), or its last token came after it."""
    if timing.ok and timing.output_tokens is None:
        return True
    return timing.e2e_s is not None and timing.t_sent_unix + timing.e2e_s > t_unix


@dataclass(frozen=True, slots=True)
class LaneLayout:
    """One lane as drawn: times on the view's axis, the prefill span at least one cell wide."""

    lane: Lane
    label: str
    """The lane's label with its TTFT (it rarely fits inside a span)."""
    sent_s: float
    prefill: tuple[float, float] | None
    """(start, end) of the drawn prefill span, clipped to the axis and widened to one cell; None while
    prefill runs (or when the span is off the axis)."""
    ticks: tuple[float, ...]
    """Decode ticks on the axis (those off it dropped)."""
    transfer: tuple[float, float] | None = None
    """(start, end) of the drawn KV transfer span, as `prefill`: the last `transfer_s` before the first token
    (the decode worker's first step, a few ms, is inside its end); the prefill span stops where it starts."""
    cells: tuple[Cell, ...] = ()
    """What each character cell of the axis shows for this lane (`tui.core.view.lane_cells`)."""

    @property
    def tick_label(self) -> str:
        """The label as drawn: the selected lane's marked with `SELECTED_MARK`, the others indented as far."""
        return (SELECTED_MARK if self.lane.selected else " " * len(SELECTED_MARK)) + self.label

    @property
    def prefill_s(self) -> float:
        """The drawn span's length in seconds (0 while none is drawn)."""
        return 0.0 if self.prefill is None else self.prefill[1] - self.prefill[0]


@dataclass(frozen=True, slots=True)
class TimelineLayout:
    view: str
    rows: tuple[LaneLayout, ...]
    """The lanes shown, oldest first."""
    hidden: int
    """Older lanes kept but not shown: the pane has no rows for them ("+N older")."""
    x_min: float
    x_max: float
    cells: int
    """Axis width in character cells."""
    newer: int = 0
    """Newer lanes kept but not shown: the selection scrolled up past the rows the pane has ("+N newer")."""

    @property
    def cell_s(self) -> float:
        return (self.x_max - self.x_min) / self.cells

    def span_cells(self, row: LaneLayout) -> float:
        """A lane's drawn prefill span in cells."""
        return row.prefill_s / self.cell_s


def _ttft_text(lane: Lane) -> str:
    if lane.first_token_s is None:
        return "…" if lane.ok else "failed"
    ms = (lane.first_token_s - lane.sent_s) * 1e3
    return f"{ms:,.0f} ms" if ms >= 10 else f"{ms:.1f} ms"


def lane_label(lane: Lane) -> str:
    return f"{lane.label} {_ttft_text(lane)}"


def _end(lane: Lane) -> float:
    return lane.token_s[-1] if lane.token_s else lane.first_token_s if lane.first_token_s is not None else lane.sent_s


def _shift(lane: Lane, by: float) -> Lane:
    return replace(lane, sent_s=lane.sent_s - by,
                   first_token_s=None if lane.first_token_s is None else lane.first_token_s - by,
                   token_s=tuple(t - by for t in lane.token_s))


def axis_range(shown: Sequence[Lane], view: str, batch_of: Sequence[int] | None = None) -> tuple[float, float]:
    """The axis for `shown` lanes (already placed for the view): aligned, 0 → the longest lane; wall clock,
    the last batch's span when it was several at once, else the span of the lanes shown."""
    if not shown:
        return 0.0, 1.0
    compared = list(shown)
    if view == WALL_CLOCK and batch_of is not None and len(batch_of) == len(shown):
        last = [lane for lane, b in zip(shown, batch_of, strict=True) if b == batch_of[-1]]
        if len(last) > 1:
            compared = last
    start = 0.0 if view == ALIGNED else min(lane.sent_s for lane in compared)
    end = max(_end(lane) for lane in compared)
    return start, max(end, start + MIN_AXIS_S)


def label_width(shown: Sequence[Lane]) -> int:
    """The widest drawn label (`LaneLayout.tick_label`: the lane's label and TTFT after the selection mark)."""
    return max((len(SELECTED_MARK) + len(lane_label(lane)) for lane in shown), default=0)


def axis_cells(width: int, shown: Sequence[Lane]) -> int:
    """Cells of the x axis in a chart `width` wide: less the labels and the space after them."""
    return max(4, width - label_width(shown) - 1)


def layout(lanes_kept: Sequence[Lane], view: str, rows: int, width: int,
           batch_of: Sequence[int] | None = None) -> TimelineLayout:
    """What the pane draws: the newest lanes that fit `rows` (scrolled up to the selected lane when it is older
    than those), placed for `view` (aligned: each from its own send; wall clock: as given, zero at the earliest
    send shown), on an axis zoomed to what is compared, in a plot `width` cells wide. `batch_of` (one batch
    number per lane kept) lets wall clock zoom to the last batch shown."""
    fit = max(1, rows)
    kept = list(lanes_kept)
    selected = next((i for i, lane in enumerate(kept) if lane.selected), len(kept) - 1)
    first = min(max(0, len(kept) - fit), max(selected, 0))
    shown = kept[first:first + fit]
    shown_batches = list(batch_of)[first:first + fit] if batch_of is not None and len(batch_of) == len(kept) else None
    if view == ALIGNED:
        placed = [_shift(lane, lane.sent_s) for lane in shown]
    else:
        origin = min((lane.sent_s for lane in shown), default=0.0)
        placed = [_shift(lane, origin) for lane in shown]
    x_min, x_max = axis_range(placed, view, shown_batches)
    cells = axis_cells(width, placed)
    cell_s = (x_max - x_min) / cells
    per_cell = tokens_per_cell([_on_axis(lane, x_min, x_max) for lane in placed if not lane.burst], x_min, cell_s, cells)
    drawn = []
    for lane in placed:
        prefill = transfer = None
        if lane.first_token_s is not None:
            handed_over = lane.first_token_s
            if lane.transfer_s:
                handed_over = max(lane.sent_s, lane.first_token_s - lane.transfer_s)
                transfer = _span(handed_over, lane.first_token_s, x_min, x_max, cell_s)
            prefill = _span(lane.sent_s, handed_over, x_min, x_max, cell_s)
        ticks = tuple(t for t in lane.token_s if x_min <= t <= x_max)
        marks = lane_cells(lane.token_s, prefill, transfer, lane.sent_s, lane.gaps, lane.typical_gap_s, ok=lane.ok,
                           burst=lane.burst, x_min=x_min, x_max=x_max, cells=cells, per_cell=per_cell,
                           tokens_per_chunk=lane.tokens_per_chunk)
        drawn.append(LaneLayout(lane, lane_label(lane), lane.sent_s, prefill, ticks, transfer, marks))
    return TimelineLayout(view, tuple(drawn), first, x_min, x_max, cells, newer=len(kept) - first - len(shown))


def _on_axis(lane: Lane, x_min: float, x_max: float) -> tuple[list[float], list[int] | None]:
    """The lane's arrivals on the axis, and the tokens each carried (None: one each)."""
    inside = [i for i, t in enumerate(lane.token_s) if x_min <= t <= x_max]
    carried = [lane.tokens_per_chunk[i] for i in inside] if lane.tokens_per_chunk is not None else None
    return [lane.token_s[i] for i in inside], carried


def _span(start: float, end: float, x_min: float, x_max: float, cell_s: float) -> tuple[float, float] | None:
    """(start, end) clipped to the axis and never thinner than one cell; None when it is off the axis."""
    if end < x_min or start > x_max:
        return None
    start, end = max(start, x_min), min(end, x_max)
    if end - start < cell_s:
        start = min(start, x_max - cell_s)
        end = start + cell_s
    return start, end
