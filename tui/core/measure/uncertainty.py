"""How sure a compared figure is: bootstrap intervals over a run's requests, and the verdict they allow.

A figure of a run (TTFT p99, ITL p50, the worst gap) is a statistic of its requests, so its interval comes
from resampling them with replacement: a block bootstrap, because what the server did to one request it did to
every request beside it. Requests sent together share their prefill step, and every stream decoding at one
moment gets the same step's gap: counted as independent, ten requests sent at once would look like ten
measurements of one step's luck (the same workload twice on the simulator was then called "worse" in half
the trials). So a draw is a block of time (`draw_block_s`): the requests sent in it, or the gaps (of every
stream) that ended in it. A difference's interval resamples both runs, each on its own.

The verdict follows from the difference's interval: better or worse only when it excludes zero and the
change is at least `PRACTICAL` of the figure before; a tie when it lies within ± that much; otherwise not
enough requests, with about how many more a side would tell (an interval narrows as 1/√n). A percentile
is judged only where at least `MIN_REQUESTS` draws hold values beyond it on each side: a p99 of 20 requests is
their maximum, which no bootstrap can place.

The worst gap is no statistic a bootstrap can hold (a resample's maximum is never above the sample's, and equals
it 63 % of the time: the same workload twice was called different in one trial in five). Its verdict is a
count instead: after is worse when the longest draws' worst gaps of the two runs, taken together, are all
after's, so many of them that two alike runs would do that less than (1 − `LEVEL`) / 2 of the time (draws exchangeable:
C(n_after, k) / C(n_before + n_after, k)); it has no interval.

The resampling is seeded: the same two runs give the same intervals every time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy loads with the first comparison, never at the UI's start
    import numpy as np
    from numpy.random import Generator
    from numpy.typing import NDArray

LEVEL = 0.99
"""The intervals' confidence level. A comparison judges nine figures at once: at 95 % a figure, the same workload
twice named a difference in 6 trials of 100 on the simulator (bench/aa_rate.py); at 99 %, in none of 100."""
JOINT_LEVEL = round(1 - 2 * (1 - LEVEL), 6)
"""How often a change's interval built from two intervals' far ends holds it (`judge_intervals`)."""
RESAMPLES = 1000
SEED = 0
MIN_REQUESTS = 5
"""Fewer draws than this on a side: no interval is worth drawing (a bootstrap of 3 draws is 10 outcomes)."""
BLOCK_GAPS = 5
"""A draw's block of time is at least this many of the run's median gaps (a decode step shared, and the next few)
and at least its median TTFT (requests sent within one prefill of each other shared it)."""
PRACTICAL = 0.05
"""A change smaller than this share of the figure before is no difference worth naming, however sure."""
POINTS_PER_REQUEST = 128
"""A request's gaps enter the resampling as at most this many of their quantiles (each weighing its share):
a pooled percentile of 32 streams × 500 gaps then costs a few milliseconds a resample, not a sort of 16,000."""
BLOCK = 100
"""Resamples computed together (a block's weights: BLOCK × points)."""

BETTER, WORSE, TIE, NOT_ENOUGH = "better", "worse", "tie", "not_enough_data"

Clusters = Sequence[Sequence[float]]
"""One run's samples of a figure, a sequence per draw (`tui.core.runs.run_record.request_samples`: the values of the requests
sent in one block of time, or the gaps that ended in one)."""


@dataclass(frozen=True, slots=True)
class Judged:
    """A compared figure's uncertainty: each side's interval, the change's, and what they allow."""

    before_ci: tuple[float, float] | None
    after_ci: tuple[float, float] | None
    ci: tuple[float, float] | None
    """The change's interval (after − before)."""
    verdict: str
    more_requests: int | None
    """With NOT_ENOUGH: about how many more requests a side would likely tell; None where no number would."""
    n_before: int
    n_after: int
    """The draws each side's interval rests on."""
    level: float = LEVEL
    """How often the change's interval holds the change."""

    def to_json(self) -> dict[str, Any]:
        return {
            "ci_low": self.ci[0] if self.ci else None,
            "ci_high": self.ci[1] if self.ci else None,
            "level": self.level,
            "verdict": self.verdict,
            "more_requests": self.more_requests,
            "before_ci": list(self.before_ci) if self.before_ci else None,
            "after_ci": list(self.after_ci) if self.after_ci else None,
            "n_before": self.n_before,
            "n_after": self.n_after,
            "practical_pct": 100 * PRACTICAL,
        }


def judge(before: Clusters, after: Clusters, stat: str, before_value: float | None, after_value: float | None,
          higher_is_better: bool, requests: tuple[int, int] | None = None) -> Judged:
    """The intervals of `stat` ("p50", "p99", "mean"; "max" by its count) over each side's draws and of the change,
    and the verdict they allow. `requests`: how many requests each side's draws hold, so that "more" is counted in
    requests (a draw of requests sent close together is several); None: a draw each."""
    judged = _judge(before, after, stat, before_value, after_value, higher_is_better)
    if judged.more_requests is None or requests is None:
        return judged
    fewer = min((judged.n_before, requests[0]), (judged.n_after, requests[1]))
    per_draw = fewer[1] / fewer[0] if fewer[0] else 1.0
    return replace(judged, more_requests=max(1, math.ceil(judged.more_requests * max(per_draw, 1.0))))


def _judge(before: Clusters, after: Clusters, stat: str, before_value: float | None, after_value: float | None,
           higher_is_better: bool) -> Judged:
    n_before, n_after = _usable(before), _usable(after)
    if before_value is None or after_value is None or min(n_before, n_after) < MIN_REQUESTS:
        more = MIN_REQUESTS - min(n_before, n_after) if before_value is not None and after_value is not None else None
        return Judged(None, None, None, NOT_ENOUGH, more, n_before, n_after)
    if stat == "max":
        verdict = worst_verdict(before, after, before_value, after_value, higher_is_better)
        return Judged(None, None, None, verdict, None, n_before, n_after)
    if stat != "mean":
        more = max(_tail_shortfall(before, before_value), _tail_shortfall(after, after_value))
        if more:
            return Judged(None, None, None, NOT_ENOUGH, more, n_before, n_after)
    rng = _rng()
    drawn_before, drawn_after = resampled(before, stat, rng), resampled(after, stat, rng)
    changes = sorted(a - b for a, b in zip(drawn_after, drawn_before, strict=True))
    ci = _bounds(changes)
    verdict, more = verdict_of(before_value, after_value, ci, min(n_before, n_after), higher_is_better)
    return Judged(_bounds(sorted(drawn_before)), _bounds(sorted(drawn_after)), ci, verdict, more, n_before, n_after)


@dataclass(frozen=True, slots=True)
class Interval:
    """One run's figure with its interval, where a row keeps no draws to resample later (an experiment's rows).

    The bounds are the resamples' own percentiles, so a percentile's interval is as lopsided as its data (a p99 of
    skewed gaps reaches far above it and hardly below) and never leaves the values measured: no latency below zero."""

    ci: tuple[float, float] | None
    n: int
    """The draws it rests on."""
    more: int | None
    """Without an interval: about how many more draws would give one; None where no number would."""
    reason: str | None = None
    """Without an interval for a value: why, in a few words ("fewer than 5 draws", "fewer than 5 draws above p99"); the
    same words for every row alike, so a table notes each reason once (`n` and `more` have the numbers)."""

    @classmethod
    def of_row(cls, row: dict[str, Any], key: str) -> Interval | None:
        """The interval an experiment's row keeps for `key` (its `to_json`, under "intervals"); None where it keeps none."""
        kept = (row.get("intervals") or {}).get(key)
        if kept is None:
            return None
        return cls(tuple(kept["ci"]) if kept["ci"] else None, kept["n"], kept["more"], kept.get("reason"))

    def to_json(self) -> dict[str, Any]:
        low, high = self.ci or (None, None)
        return {"ci": list(self.ci) if self.ci else None, "ci_low": low, "ci_high": high, "level": LEVEL, "n": self.n,
                "more": self.more, "reason": self.reason}


def interval(clusters: Clusters, stat: str, value: float | None) -> Interval:
    """`stat`'s interval over one run's draws, under `judge`'s rules (none for "max", none until there are
    `MIN_REQUESTS` draws, and for a percentile as many beyond it on each side), or why it has none."""
    n = _usable(clusters)
    if value is None:
        return Interval(None, n, None)
    if stat == "max":
        return Interval(None, n, None, "a maximum has none (no resample's is above the sample's)")
    values = {v for cluster in clusters for v in cluster if math.isfinite(v)}
    if n >= MIN_REQUESTS and len(values) == 1:  # every draw alike: so is every resample
        return Interval((value, value), n, None)
    tail_more = 0 if stat == "mean" else _tail_shortfall(clusters, value)
    if n < MIN_REQUESTS:
        return Interval(None, n, max(MIN_REQUESTS - n, tail_more), f"fewer than {MIN_REQUESTS} draws")
    if tail_more:
        above, below = _beyond(clusters, value)
        return Interval(None, n, tail_more, f"fewer than {MIN_REQUESTS} draws {'above' if above <= below else 'below'} {stat}")
    return Interval(_bounds(sorted(resampled(clusters, stat, _rng()))), n, None)


def judge_intervals(before: float | None, after: float | None, before_ci: Interval | None, after_ci: Interval | None,
                    higher_is_better: bool) -> Judged:
    """The verdict two figures' own intervals allow, where their draws are gone: the change's interval is from the
    two intervals' far ends, so it holds the change whenever both hold their figure (at least 1 − 2 × (1 − `LEVEL`)
    of the time); better or worse then means the two intervals do not overlap."""
    if before is None or after is None or before_ci is None or after_ci is None:
        return Judged(None, None, None, NOT_ENOUGH, None, 0, 0, JOINT_LEVEL)
    n = min(before_ci.n, after_ci.n)
    if before_ci.ci is None or after_ci.ci is None:
        missing = [i.more for i in (before_ci, after_ci) if i.ci is None]
        more = None if any(m is None for m in missing) else max(m for m in missing if m is not None)
        return Judged(before_ci.ci, after_ci.ci, None, NOT_ENOUGH, more, before_ci.n, after_ci.n, JOINT_LEVEL)
    ci = (after_ci.ci[0] - before_ci.ci[1], after_ci.ci[1] - before_ci.ci[0])
    verdict, more = verdict_of(before, after, ci, n, higher_is_better)
    return Judged(before_ci.ci, after_ci.ci, ci, verdict, more, before_ci.n, after_ci.n, JOINT_LEVEL)


def draw_block_s(median_gap_s: float | None, median_ttft_s: float | None) -> float:
    """How long a stretch of a run is one draw (see the module's docstring); 0 where the run has no timing."""
    return max(BLOCK_GAPS * (median_gap_s or 0.0), median_ttft_s or 0.0)


def by_block(timed: Sequence[tuple[float, float]], block_s: float) -> list[tuple[float, ...]]:
    """(time, value) pairs grouped into draws: the values whose times fall in one block of `block_s` seconds
    (from the earliest time); each value alone where the block is 0."""
    if not timed:
        return []
    if block_s <= 0:
        return [(value,) for _, value in timed]
    start = min(t for t, _ in timed)
    blocks: dict[int, list[float]] = {}
    for t, value in timed:
        blocks.setdefault(int((t - start) // block_s), []).append(value)
    return [tuple(values) for _, values in sorted(blocks.items())]


def once_a_run(before_value: float | None, after_value: float | None) -> Judged:
    """A figure a run has once (a throughput over the whole run): one sample a side, so no interval and no verdict
    until the runs are repeated."""
    n = int(before_value is not None), int(after_value is not None)
    return Judged(None, None, None, NOT_ENOUGH, None, *n)


def worst_verdict(before: Clusters, after: Clusters, before_value: float, after_value: float,
                  higher_is_better: bool) -> str:
    """The worst gap's verdict from which run the worst draws are (see the module's docstring)."""
    worst = sorted([(max(c), 0) for c in before if c] + [(max(c), 1) for c in after if c], reverse=True)
    run = next((k for k, (_, side) in enumerate(worst) if side != worst[0][1]), len(worst))  # top draws from one side
    side_n = (len(before), len(after))[worst[0][1]]
    alike = math.comb(side_n, run) / math.comb(len(worst), run)
    change = after_value - before_value
    if alike <= (1 - LEVEL) / 2 and abs(change) >= PRACTICAL * abs(before_value):
        return BETTER if (change > 0) == higher_is_better else WORSE
    return TIE if abs(change) < PRACTICAL * abs(before_value) else NOT_ENOUGH


def draws_to_rank() -> int:
    """The fewest draws a side with which `worst_verdict` can be sure: all of one side's above all of the other's
    happens to two alike sides 1 / C(2n, n) of the time."""
    return next(n for n in range(1, 64) if 1 / math.comb(2 * n, n) <= (1 - LEVEL) / 2)


def verdict_of(before: float, after: float, ci: tuple[float, float], n: int, higher_is_better: bool) -> tuple[str, int | None]:
    """What the change's interval allows (and, when it allows nothing, about how many more requests a side would)."""
    low, high = ci
    change, threshold = after - before, PRACTICAL * abs(before)
    if (low > 0 or high < 0) and abs(change) >= threshold:
        return (BETTER if (change > 0) == higher_is_better else WORSE), None
    if -threshold <= low and high <= threshold:
        return TIE, None
    # How far the interval must shrink about the change (to exclude zero past the threshold, or to fit within ±
    # the threshold); it shrinks as 1/√n, so n/k² requests would make it k times as wide.
    below, above = change - low, high - change
    if abs(change) >= threshold:  # the side toward zero must come within the change
        room = below if change > 0 else above
        k = abs(change) / room if room > 0 else 0.0
    else:  # both sides must come within the threshold
        k = min(_ratio(threshold + change, below), _ratio(threshold - change, above))
    if not 0 < k < 1:
        return NOT_ENOUGH, None
    return NOT_ENOUGH, max(1, math.ceil(n / k ** 2) - n)


def _ratio(allowed: float, extent: float) -> float:
    return allowed / extent if extent > 0 else math.inf


def resampled(clusters: Clusters, stat: str, rng: Generator) -> list[float]:
    """`stat` of RESAMPLES resamples of the requests (each drawn with all its values)."""
    import numpy as np  # here, not at import: numpy loads with the first comparison, never at the UI's start

    kept = [sorted(v for v in cluster if math.isfinite(v)) for cluster in clusters]
    kept = [values for values in kept if values]
    n = len(kept)
    draws = rng.integers(0, n, size=(RESAMPLES, n))
    if all(len(values) == 1 for values in kept):  # one value a request: each resample's exact statistic
        drawn = np.array([values[0] for values in kept])[draws]
        exact: list[float] = (drawn.mean(axis=1) if stat == "mean" else np.percentile(drawn, _q(stat), axis=1)).tolist()
        return exact
    points, weights, owner = _points(kept)
    counts = np.zeros((RESAMPLES, n))
    np.add.at(counts, (np.repeat(np.arange(RESAMPLES), n), draws.ravel()), 1)
    out: list[float] = []
    for start in range(0, RESAMPLES, BLOCK):
        weighed = counts[start:start + BLOCK][:, owner] * weights
        if stat == "mean":
            out.extend((weighed @ points / weighed.sum(axis=1)).tolist())
            continue
        cumulative = np.cumsum(weighed, axis=1)
        targets = cumulative[:, -1] * _q(stat) / 100
        at = np.minimum((cumulative < targets[:, None]).sum(axis=1), len(points) - 1)
        out.extend(points[at].tolist())
    return out


def _points(kept: list[list[float]]) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.intp]]:
    """Every request's values (or `POINTS_PER_REQUEST` of their quantiles), sorted together, each with its weight
    (the values it stands for) and its request's index."""
    import numpy as np

    values: list[float] = []
    weights: list[float] = []
    owner: list[int] = []
    for index, sorted_values in enumerate(kept):
        m = len(sorted_values)
        if m > POINTS_PER_REQUEST:
            sorted_values = [sorted_values[min(m - 1, int((k + 0.5) * m / POINTS_PER_REQUEST))] for k in range(POINTS_PER_REQUEST)]
        values.extend(sorted_values)
        weights.extend([m / len(sorted_values)] * len(sorted_values))
        owner.extend([index] * len(sorted_values))
    order = np.argsort(values, kind="stable")
    return np.array(values)[order], np.array(weights)[order], np.array(owner)[order]


def _tail_shortfall(clusters: Clusters, value: float) -> int:
    """About how many more draws a percentile at `value` needs before `MIN_REQUESTS` draws hold values beyond it
    on either side (a p99 of 20 requests is their maximum, and no bootstrap can place it); 0 when it has them."""
    tail = min(_beyond(clusters, value))
    if tail >= MIN_REQUESTS:
        return 0
    n = _usable(clusters)
    return max(1, math.ceil(n * MIN_REQUESTS / tail) - n) if tail else max(1, n * MIN_REQUESTS)


def _beyond(clusters: Clusters, value: float) -> tuple[int, int]:
    """How many draws hold a value above `value`, and how many one below it."""
    return (sum(1 for c in clusters if any(v > value for v in c)), sum(1 for c in clusters if any(v < value for v in c)))


def _usable(clusters: Clusters) -> int:
    return sum(1 for cluster in clusters if any(math.isfinite(v) for v in cluster))


def _q(stat: str) -> float:
    return float(stat[1:])


def _bounds(sorted_draws: list[float]) -> tuple[float, float]:
    tail = (1 - LEVEL) / 2
    last = len(sorted_draws) - 1
    return sorted_draws[round(tail * last)], sorted_draws[round((1 - tail) * last)]


def _rng() -> Generator:
    import numpy as np

    return np.random.default_rng(SEED)
