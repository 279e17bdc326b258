"""Exact percentiles over samples, interpolated as numpy.percentile's default (linear) does.

That is the interpolation `vllm bench serve` reports, so phasetop's p99 and vLLM's compare.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass


@dataclass(frozen=True, slots=True)
class Summary:
    """Mean and percentiles of one figure over n samples; None where there are no samples."""

    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    n: int

    def to_json(self) -> dict:
        return asdict(self)


def percentile(sorted_samples: list[float], q: float) -> float:
    """The q-th percentile (0–100) of already sorted samples, with linear interpolation."""
    if not sorted_samples:
        raise ValueError("percentile of no samples")
    rank = (len(sorted_samples) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(sorted_samples) - 1)
    fraction = rank - low
    return sorted_samples[low] + (sorted_samples[high] - sorted_samples[low]) * fraction


def summarize(samples: Iterable[float | None]) -> Summary:
    """Mean, p50, p90, p99 and n of the samples that are not None."""
    values = sorted(s for s in samples if s is not None)
    if not values:
        return Summary(None, None, None, None, 0)
    return Summary(
        mean=math.fsum(values) / len(values),
        p50=percentile(values, 50),
        p90=percentile(values, 90),
        p99=percentile(values, 99),
        n=len(values),
    )
