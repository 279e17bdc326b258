"""When each request of a load is sent: a gamma arrival process, drawn as `vllm bench serve` draws it.

vLLM 0.33 (`vllm/benchmarks/serve.py`, `get_request`): each gap is Gamma(shape = burstiness,
scale = 1 / (rate · burstiness)), so the mean gap is 1 / rate whatever the burstiness; burstiness 1
gives exponential gaps (a Poisson process), below 1 burstier, above 1 more even, and infinity a
constant 1 / rate. A rate of infinity sends every request at once. The gaps are summed from the start
(the first request too waits one gap), and the sums are then rescaled so the last request lands at
exactly N / rate: without that, the total drifts 1–2 % from seed to seed and so does the throughput.

Here the schedule is drawn at unit rate (mean gap 1) and divided by the rate when it is used. Since
Gamma(b, 1 / (r·b)) = Gamma(b, 1 / b) / r, a constant rate gives vLLM's send times, and a load dial
can turn the rate while the load runs without redrawing anything (`Pacer`).
"""

from __future__ import annotations

import math
import random
from itertools import accumulate


def unit_gap(burstiness: float, rng: random.Random) -> float:
    """One gap of the arrival process at one request a second."""
    if burstiness <= 0:
        raise ValueError(f"burstiness must be positive, got {burstiness}")
    if math.isinf(burstiness):
        return 1.0
    return rng.gammavariate(burstiness, 1.0 / burstiness)


def unit_schedule(n: int, burstiness: float, rng: random.Random) -> list[float]:
    """Send times of `n` requests at one request a second, rescaled as vLLM does so the last is exactly `n`.

    Divide by a rate r for send times in seconds: the last then lands at n / r.
    """
    if n < 1:
        return []
    times = list(accumulate(unit_gap(burstiness, rng) for _ in range(n)))
    scale = n / times[-1]
    return [t * scale for t in times]


class Pacer:
    """Maps unit-rate send times onto a clock while the rate changes.

    Unit time advances at `rate` units a second, so with a constant rate the send time of unit time u
    is start + u / rate. When the rate changes, unit time already passed is kept, so the gap under way
    finishes at the new rate. Rate 0 pauses; rate infinity makes everything due at once.
    """

    def __init__(self, start_s: float, rate: float) -> None:
        self._anchor_s = start_s
        self._anchor_unit = 0.0
        self.rate = _checked(rate)

    def unit_at(self, now_s: float) -> float:
        """Unit time reached at `now_s`."""
        if math.isinf(self.rate):
            return math.inf
        return self._anchor_unit + (now_s - self._anchor_s) * self.rate

    def set_rate(self, now_s: float, rate: float, next_unit: float) -> None:
        """Change the rate from `now_s` on; `next_unit` is the unit time of the next request not yet sent.

        A schedule running behind (or at infinite rate) restarts from `next_unit`: that request is due
        now, the rest follow at the new rate rather than in a burst that catches up.
        """
        self._anchor_unit = min(self.unit_at(now_s), next_unit)
        self._anchor_s = now_s
        self.rate = _checked(rate)

    def due_at(self, unit_t: float) -> float:
        """Clock time at which unit time `unit_t` is reached: -inf at infinite rate, +inf while paused."""
        if math.isinf(self.rate):
            return -math.inf
        if self.rate == 0:
            return math.inf
        return self._anchor_s + (unit_t - self._anchor_unit) / self.rate


def _checked(rate: float) -> float:
    if not rate >= 0:  # also catches NaN
        raise ValueError(f"request rate must be 0 or more, got {rate}")
    return float(rate)
