"""The load dial's ladders (the request rates and concurrencies its keys step through) and where a load stands."""

from __future__ import annotations

from dataclasses import dataclass

LOAD_RATES = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)
LOAD_CONCURRENCIES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""The dial's concurrency steps (256 is the HTTP client's connection pool)."""


def step(steps: tuple[float, ...], value: float, factor: float) -> float:
    """The next step up (factor > 1) or down from `value`, staying on the ladder's ends."""
    if factor > 1:
        return next((s for s in steps if s > value), steps[-1])
    return next((s for s in reversed(steps) if s < value), steps[0])


@dataclass(frozen=True, slots=True)
class LoadProgress:
    """Where a run stands, for a progress line or a gauge."""

    planned: int | None
    sent: int
    finished: int
    failed: int
    in_flight: int
    waiting: int
    """Arrived, waiting for a slot under the concurrency."""
    elapsed_s: float
    recent_rps: float
    """Requests finished a second over the last RATE_WINDOW_S (or since the start, if shorter)."""
