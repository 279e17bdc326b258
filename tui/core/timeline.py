"""Timeline lanes: each request as a prefill span then decode ticks on one shared time axis."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from tui.core.records import RequestTiming


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


def lanes(timings: Sequence[RequestTiming], labels: Sequence[str] | None = None, keep: int = 8) -> list[Lane]:
    """The last `keep` requests as lanes on one axis whose zero is the earliest send among them."""
    shown = list(timings)[-keep:]
    shown_labels = list(labels)[-keep:] if labels is not None else [f"#{i + 1}" for i in range(len(shown))]
    if not shown:
        return []
    origin = min(t.t_sent_unix for t in shown)
    result = []
    for timing, label in zip(shown, shown_labels, strict=True):
        sent = timing.t_sent_unix - origin
        ticks = tuple(sent + offset for offset in timing.token_offsets_s)
        result.append(Lane(label, sent, ticks[0] if ticks else None, ticks, timing.ok))
    return result


def refit(shown: Sequence[Lane], keep: int) -> list[Lane]:
    """The last `keep` (≥ 1) of `shown`, moved so the axis's zero is again the earliest send among them
    (a short plot has room for fewer lanes than were kept)."""
    kept = list(shown)[-keep:]
    if not kept:
        return []
    origin = min(lane.sent_s for lane in kept)
    return [replace(lane, sent_s=lane.sent_s - origin,
                    first_token_s=None if lane.first_token_s is None else lane.first_token_s - origin,
                    token_s=tuple(t - origin for t in lane.token_s)) for lane in kept]


def thin(ticks: Sequence[float], start_s: float, end_s: float, cells: int, per_cell: int = 4) -> list[float]:
    """At most `per_cell` ticks per character cell of a `cells`-wide axis from `start_s` to `end_s`: one
    character shows one dot however many tokens fell in it, and plotext's cost grows with the points.

    Leaves `ticks` as they are while they number no more than `per_cell` a cell; else keeps the first tick
    of each slot (and the last tick), so every cell that had a tick still has one.
    """
    slots = max(1, cells) * per_cell
    if len(ticks) <= slots or end_s <= start_s:
        return list(ticks)
    scale = slots / (end_s - start_s)
    kept, last_slot = [], None
    for tick in ticks:
        slot = int((tick - start_s) * scale)
        if slot != last_slot:
            kept.append(tick)
            last_slot = slot
    if kept[-1] != ticks[-1]:
        kept.append(ticks[-1])
    return kept
