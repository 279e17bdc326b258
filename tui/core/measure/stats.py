"""Exact percentiles over samples, interpolated as numpy.percentile's default (linear) does.

That is the interpolation `vllm bench serve` reports, so phasetop's p99 and vLLM's compare.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Summary:
    """Mean and percentiles of one figure over n samples; None where there are no samples."""

    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    n: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def percentile(sorted_samples: list[float], q: float) -> float:
    """The q-th percentile (0–100) of already sorted samples, with linear interpolation."""
    if not sorted_samples:
        raise ValueError("percentile of no samples")
    rank = (len(sorted_samples) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(sorted_samples) - 1)
    fraction = rank - low
    below, above = sorted_samples[low], sorted_samples[high]
    spread = above - below
    if math.isinf(spread):  # two values near ±1e308 of opposite sign: weigh them rather than overflow
        return below * (1 - fraction) + above * fraction
    return below + spread * fraction


def summarize(samples: Iterable[float | None]) -> Summary:
    """Mean, p50, p90, p99 and n of the samples that are finite numbers.

    None, NaN and ±inf are not measurements (a server can report them in its timings): left out, as if
    absent.
    """
    values = sorted(s for s in samples if s is not None and math.isfinite(s))
    if not values:
        return Summary(None, None, None, None, 0)
    return Summary(
        mean=_mean(values),
        p50=percentile(values, 50),
        p90=percentile(values, 90),
        p99=percentile(values, 99),
        n=len(values),
    )


def summarize_with_max(samples: Iterable[float | None]) -> dict[str, Any]:
    """`summarize` as JSON plus `max`: for gaps between tokens, where the worst one (a long prompt's stall on the
    streams it interrupts) is a handful among thousands and sits under any percentile."""
    values = [s for s in samples if s is not None and math.isfinite(s)]
    return {**summarize(values).to_json(), "max": max(values, default=None)}


def total_of_all(values: Iterable[float | None]) -> float | None:
    """The sum of the values when every one is known and there is at least one; None otherwise (a total with a part
    missing is not the total)."""
    known = list(values)
    if not known or any(v is None for v in known):
        return None
    return sum(v for v in known if v is not None)


def _mean(values: list[float]) -> float:
    try:
        return math.fsum(values) / len(values)
    except OverflowError:  # values near 1e308: each one's share, summed, held within the values (the shares'
        share = math.fsum(v / (2 * len(values)) for v in values)  # rounding can carry the sum past the largest float)
        return min(max(2 * share, min(values)), max(values))
