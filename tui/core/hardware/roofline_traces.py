"""The experiments on the roofline: a sweep's rows as a trace of points, and decode projected to fewer bits.

The concurrency experiment's rows are decode at one batch each (its streams), timed over the stretch in which
all of them decoded; the prompt-length experiment's are prefill at one prompt length each. Both are placed
from the model's layout, as the live points are. Decode at a narrower bit width reads half the weight bytes
for the same FLOPs: its point moves right and the roof above it rises. Nothing measures that point here, so it
is a projection (the same share of the roof it would then sit under), and says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tui.core.hardware.roofline import PROJECTED, PhasePoint, decode_point, decode_step_traffic, weight_bytes
from tui.core.hardware.roofline_phases import prefill_model_point
from tui.core.hardware.roofline_target import RooflineTarget

CONCURRENCY, PROMPT_TOKENS = "concurrency", "prompt-tokens"
"""The experiments with a trace, by their `--vary` names."""
TRACED = (CONCURRENCY, PROMPT_TOKENS)
NARROWER_BITS = {16: 8, 8: 4}
"""The bit width decode is projected to beside the served one: half the weight bytes."""
NOT_TOGETHER = ("the streams never all decoded at once (a server that runs fewer at a time), or one failed or "
                "came in bursts")


@dataclass(frozen=True, slots=True)
class RowPoint:
    """One row's point, or why it has none."""

    value: int
    """The value the row swept: streams, or prompt tokens."""
    point: PhasePoint | None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The point in `phasetop roofline --json`'s fields, or those fields null and the reason."""
        if self.point is not None:
            return self.point.to_json() | {"reason": None}
        return {"source": "model", "intensity_flop_per_byte": None, "achieved_flops": None, "roof_flops": None,
                "roof_share": None, "bound": None, "batch": None, "tokens": None, "reading": None,
                "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Trace:
    """An experiment's rows on the roofline, in the order swept, and one line reading them."""

    vary: str
    rows: tuple[RowPoint, ...]
    reading: str

    @property
    def points(self) -> tuple[PhasePoint, ...]:
        return tuple(row.point for row in self.rows if row.point is not None)


def experiment_trace(target: RooflineTarget, vary: str, rows: Sequence[Mapping[str, Any]]) -> Trace | None:
    """The trace of an experiment's rows; None for an experiment that has none (only two have)."""
    if vary == CONCURRENCY:
        placed = tuple(concurrency_point(target, row) for row in rows)
        return Trace(vary, placed, concurrency_reading(target, placed))
    if vary == PROMPT_TOKENS:
        placed = tuple(prompt_length_point(target, row) for row in rows)
        return Trace(vary, placed, prompt_length_reading(target, placed, rows))
    return None


def concurrency_point(target: RooflineTarget, row: Mapping[str, Any]) -> RowPoint:
    """Decode at a batch of the row's streams: their decode rate while all of them decoded, at their mean context."""
    streams, tok_s, context = row["streams"], row.get("batch_decode_tok_s"), row.get("context_tokens")
    if not tok_s:
        return RowPoint(streams, None, NOT_TOGETHER)
    if context is None:
        return RowPoint(streams, None, "the server gave no token counts, so the context the streams read is unknown")
    layout = target.layout
    return RowPoint(streams, decode_point(target.roofs, layout, layout.params, target.weight_bytes, streams, context,
                                          tok_s))


def prompt_length_point(target: RooflineTarget, row: Mapping[str, Any]) -> RowPoint:
    """Prefill of the row's prompt: its prefill rate (the server's split where it gives one, else prompt tokens over
    TTFT, which adds the queue and the network: a lower bound on the share)."""
    tokens, rate = row["prompt_tokens"], row.get("prefill_tok_s")
    if not rate:
        return RowPoint(tokens, None, "no prompt finished with a first token")
    return RowPoint(tokens, prefill_model_point(target, tokens, tokens / rate))


def ridge_batch(target: RooflineTarget, context: float) -> float | None:
    """The batch at which decode meets the compute roof, each sequence at `context`: batch × FLOPs a token over
    (weights + batch × the KV a sequence reads) reaches the ridge. None when the KV alone keeps it under the ridge
    at any batch (a sequence's FLOPs over its own KV bytes are under it)."""
    layout = target.layout
    flops, read = decode_step_traffic(layout, layout.params, target.weight_bytes, 1, context)
    kv = read - target.weight_bytes
    ridge = target.roofs.ridge_flop_per_byte
    return ridge * target.weight_bytes / (flops - ridge * kv) if flops > ridge * kv else None


def concurrency_reading(target: RooflineTarget, placed: Sequence[RowPoint]) -> str:
    """ "decode moves right with the batch, ×1 → ×32: 1.0 → 29.8 FLOP/byte at 99 % of the bandwidth roof; …"."""
    points = [row.point for row in placed if row.point is not None]
    if not points:
        return f"concurrency: no decode point ({placed[0].reason if placed else 'no rows'})"
    first, last = points[0], points[-1]
    ridge = target.roofs.ridge_flop_per_byte
    line = last.reading if len(points) == 1 else (
        f"decode moves right with the batch, ×{first.batch:g} → ×{last.batch:g}: {first.intensity_flop_per_byte:,.1f}"
        f" → {last.intensity_flop_per_byte:,.1f} FLOP/byte at {_shares(points)} of {_roof(points)}")
    compute = [p for p in points if p.bound == "compute"]
    if compute:
        return f"{line}; at the compute roof from ×{compute[0].batch:g}"
    if last.context is None:  # a decode point placed from the layout always has its context
        return line
    meets = ridge_batch(target, last.context)
    if meets is None:
        return f"{line}; the KV each sequence reads keeps it under the ridge ({ridge:,.0f}) at any batch"
    return f"{line}; ridge near ×{meets:,.0f}"


def prompt_length_reading(target: RooflineTarget, placed: Sequence[RowPoint], rows: Sequence[Mapping[str, Any]]) -> str:
    """ "prefill at the compute roof from 500 to 2,000 tokens (47–49 %, MFU) while TTFT grows 17 → 68 ms; …"."""
    ttft = {row["prompt_tokens"]: row.get("ttft_s") for row in rows}
    points = [row.point for row in placed if row.point is not None]
    if not points:
        return f"prompt length: no prefill point ({placed[0].reason if placed else 'no rows'})"
    compute = [p for p in points if p.bound == "compute"]
    short = [p for p in points if p.bound != "compute"]
    under = f"{_listed(p.tokens for p in short if p.tokens is not None)} under the ridge" if short else ""
    if not compute:
        return f"prefill under the ridge ({target.roofs.ridge_flop_per_byte:,.0f} FLOP/byte) at every length: {under}"
    first, last = compute[0], compute[-1]
    grows = ""
    ttft_first, ttft_last = ttft.get(first.tokens), ttft.get(last.tokens)
    if ttft_first is not None and ttft_last is not None:
        grows = f" while TTFT grows {_ms(ttft_first)} → {_ms(ttft_last)} ms"
    line = (f"prefill at the compute roof from {first.tokens:,} to {last.tokens:,} tokens ({_shares(compute)}, MFU)"
            f"{grows}")
    return f"{line}; {under}" if short else line


def narrower_decode(target: RooflineTarget, point: PhasePoint | None) -> PhasePoint | None:
    """Decode's point with the weights at half the bits (16 → 8, 8 → 4), the batch and context the same, at the
    share of the roof above it the measured point reached: the step's FLOPs over fewer bytes. None when there is
    no measured decode point of phasetop's model, or no narrower width."""
    bits = NARROWER_BITS.get(target.bits)
    if point is None or bits is None or point.context is None or point.batch is None:
        return None
    layout = target.layout
    weights = weight_bytes(layout.params, bits)
    flops, read = decode_step_traffic(layout, layout.params, weights, point.batch, point.context)
    achieved = point.roof_share * target.roofs.roof_flops(flops / read)
    projected = decode_point(target.roofs, layout, layout.params, weights, point.batch, point.context,
                             achieved * point.batch / flops)
    return replace(projected, source=PROJECTED)


def narrower_reading(target: RooflineTarget, point: PhasePoint, ghost: PhasePoint) -> str:
    """ "8 bit, projected at the same 99 %: 2.0 FLOP/byte, a roof ×2.00 higher: decode ×2.00 as fast at batch 1"."""
    return (f"{NARROWER_BITS[target.bits]} bit, projected at the same {point.roof_share * 100:.0f} %: "
            f"{ghost.intensity_flop_per_byte:,.1f} FLOP/byte, a roof ×{ghost.roof_flops / point.roof_flops:.2f} higher: "
            f"decode ×{ghost.achieved_flops / point.achieved_flops:.2f} as fast at batch {point.batch:.3g}")


def _shares(points: Sequence[PhasePoint]) -> str:
    low, high = (round(f(p.roof_share for p in points) * 100) for f in (min, max))
    return f"{low} %" if low == high else f"{low}–{high} %"


def _roof(points: Sequence[PhasePoint]) -> str:
    bounds = {p.bound for p in points}
    return f"the {bounds.pop()} roof" if len(bounds) == 1 else "the roof above each"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f}" if seconds < 0.01 else f"{seconds * 1e3:,.0f}"


def _listed(values: Iterable[int]) -> str:
    return ", ".join(f"{v:,}" for v in values)
