"""Running figures in bounded memory: what an endless load and a long UI session report, kept as they go.

An endless load (the UI's load dial) or a UI left open for hours sees millions of tokens; keeping every
request's raw offsets to compute its figures at the end grows without bound. Here each figure is kept
as it arrives:
- counts, token totals and the peak concurrency are exact;
- a `Distribution` holds its values exactly up to `EXACT_VALUES` (the percentiles are then the very
  ones `stats.summarize` gives over all of them), and past that folds them into log-spaced buckets:
  each percentile is then within `RELATIVE_ACCURACY` of the exact one (the mean and n stay exact);
- a `Reservoir` keeps a uniform sample of the raw requests, to show and to save (said so in the run).
"""

from __future__ import annotations

import math
import random
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from tui.core.measure.records import RequestTiming
from tui.core.measure.stats import Summary, summarize

EXACT_VALUES = 100_000
"""Values a Distribution keeps as they are (800 kB); past this it keeps buckets."""
RELATIVE_ACCURACY = 0.005
"""Past EXACT_VALUES, each percentile is within ±0.5 % of the exact one (a 4.000 ms ITL reads 3.98–4.02)."""
TINY_S = 1e-9
"""Values at or under this (a zero gap) share one bucket read as 0."""

T = TypeVar("T")


class Distribution:
    """Mean and p50/p90/p99 of a stream of values, in bounded memory: exact up to `exact_values`, then buckets."""

    def __init__(self, exact_values: int = EXACT_VALUES, relative_accuracy: float = RELATIVE_ACCURACY) -> None:
        self._exact: array[float] | None = array("d")
        self._cap = exact_values
        self._gamma = (1 + relative_accuracy) / (1 - relative_accuracy)
        self._log_gamma = math.log(self._gamma)
        self._buckets: dict[int, int] = {}
        self._zeros = 0
        self.n = 0
        self._sum = 0.0
        self._compensation = 0.0
        self._min = math.inf
        self._max = -math.inf

    @property
    def exact(self) -> bool:
        """True while every value is kept: the summary is then `stats.summarize`'s, to the last bit."""
        return self._exact is not None

    def add(self, value: float | None) -> None:
        if value is None:
            return
        self.n += 1
        self._add_to_sum(value)
        self._min, self._max = min(self._min, value), max(self._max, value)
        if self._exact is not None:
            self._exact.append(value)
            if len(self._exact) > self._cap:
                kept, self._exact = self._exact, None
                for v in kept:
                    self._bucket(v)
            return
        self._bucket(value)

    def extend(self, values: Iterable[float | None]) -> None:
        for value in values:
            self.add(value)

    @property
    def max(self) -> float | None:
        """The largest value added, exactly (None before any)."""
        return self._max if self.n else None

    def summary(self) -> Summary:
        if self._exact is not None:
            return summarize(self._exact)
        # Neumaier's compensated sum: the mean agrees with math.fsum's to a few ulps.
        mean = (self._sum + self._compensation) / self.n
        return Summary(mean=mean, p50=self._percentile(50), p90=self._percentile(90), p99=self._percentile(99), n=self.n)

    def _add_to_sum(self, value: float) -> None:
        total = self._sum + value
        if abs(self._sum) >= abs(value):
            self._compensation += (self._sum - total) + value
        else:
            self._compensation += (value - total) + self._sum
        self._sum = total

    def _bucket(self, value: float) -> None:
        if value <= TINY_S:
            self._zeros += 1
        else:
            key = math.ceil(math.log(value) / self._log_gamma)
            self._buckets[key] = self._buckets.get(key, 0) + 1

    def _at_rank(self, rank: int) -> float:
        """The value of the rank-th smallest (0-based), to within the relative accuracy; the ends are exact."""
        if rank == 0:
            return self._min
        if rank == self.n - 1:
            return self._max
        seen = self._zeros
        if rank < seen:
            return 0.0
        for key in sorted(self._buckets):
            seen += self._buckets[key]
            if rank < seen:
                # The bucket holds (γ^(k−1), γ^k]: this point is within (γ − 1)/(γ + 1) of all of it.
                value = 2 * self._gamma ** key / (self._gamma + 1)
                return min(max(value, self._min), self._max)
        return self._max

    def _percentile(self, q: float) -> float:
        """Linear interpolation between the two ranks around q, as `stats.percentile` does over exact values."""
        rank = (self.n - 1) * q / 100
        low = math.floor(rank)
        high = min(low + 1, self.n - 1)
        a, b = self._at_rank(low), self._at_rank(high)
        return a + (b - a) * (rank - low)


class Reservoir(Generic[T]):
    """A uniform random sample of at most `size` items of a stream of unknown length (Vitter's algorithm R)."""

    def __init__(self, size: int, rng: random.Random | None = None) -> None:
        if size < 1:
            raise ValueError("a reservoir holds at least one item")
        self.size = size
        self.seen = 0
        """Items offered so far (the M of "a sample of K of M")."""
        self._items: list[tuple[int, T]] = []
        self._rng = rng or random.Random()

    def offer(self, order: int, item: T) -> None:
        """Offer an item; `order` sorts the sample (the request's index in send order)."""
        self.seen += 1
        if len(self._items) < self.size:
            self._items.append((order, item))
            return
        slot = self._rng.randrange(self.seen)
        if slot < self.size:
            self._items[slot] = (order, item)

    def items(self) -> list[T]:
        """The sample, in `order`."""
        return [item for _, item in sorted(self._items, key=lambda pair: pair[0])]

    def __len__(self) -> int:
        return len(self._items)


class PeakTracker:
    """Most intervals open at once, send to last token, over intervals reported as they end: `bench.peak_concurrency`
    over all of them, in memory bounded by those still open.

    `settle(horizon)` says no interval yet to be reported starts before `horizon` (the earliest send still in
    flight): every event before it is final, is swept and dropped.
    """

    def __init__(self) -> None:
        self._pending: list[tuple[float, int]] = []
        self._current = 0
        self.peak = 0

    def add(self, start: float, end: float) -> None:
        self._pending += [(start, 1), (end, -1)]

    def settle(self, horizon: float) -> None:
        self._pending.sort()
        cut = 0
        for t, delta in self._pending:
            if t >= horizon:
                break
            self._current += delta
            self.peak = max(self.peak, self._current)
            cut += 1
        del self._pending[:cut]

    def final(self) -> int:
        self.settle(math.inf)
        return self.peak

    def __len__(self) -> int:
        return len(self._pending)


@dataclass
class LoadFigures:
    """`bench.bench_figures` kept as requests finish, over every request of the run, in bounded memory."""

    completed: int = 0
    failed: int = 0
    total_input_tokens: int = 0
    total_output_tokens: int = 0
    tokens_estimated: bool = False
    ttft_s: Distribution = field(default_factory=Distribution)
    tpot_s: Distribution = field(default_factory=Distribution)
    itl_s: Distribution = field(default_factory=Distribution)
    chunk_gaps_s: Distribution = field(default_factory=Distribution)
    e2el_s: Distribution = field(default_factory=Distribution)
    peak: PeakTracker = field(default_factory=PeakTracker)

    def add(self, timing: RequestTiming) -> None:
        if not (timing.ok and timing.ttft_s is not None):  # bench.completed's test
            self.failed += 1
            return
        self.completed += 1
        self.total_input_tokens += timing.prompt_tokens or 0
        self.total_output_tokens += timing.output_tokens or 0
        self.tokens_estimated |= timing.tokens_estimated
        self.ttft_s.add(timing.ttft_s)
        self.tpot_s.add(timing.tpot_s)
        self.itl_s.extend(timing.itl_s)
        self.chunk_gaps_s.extend(timing.chunk_gaps_s)
        self.e2el_s.add(timing.e2e_s)
        if timing.e2e_s is not None:  # as bench.peak_concurrency counts
            self.peak.add(timing.t_sent_unix, timing.t_sent_unix + timing.e2e_s)

    @property
    def exact(self) -> bool:
        """Every percentile is the exact one (no distribution has folded into buckets yet)."""
        return all(d.exact for d in (self.ttft_s, self.tpot_s, self.itl_s, self.chunk_gaps_s, self.e2el_s))

    def figures(self, duration_s: float) -> dict[str, Any]:
        """The dict `bench_figures` returns for the same requests (goodput is not kept: no SLOs in an endless load)."""
        per_s = (lambda count: count / duration_s) if duration_s > 0 else (lambda count: None)
        return {
            "completed": self.completed,
            "failed": self.failed,
            "duration_s": duration_s,
            "total_input_tokens": self.total_input_tokens,
            "total_output_tokens": self.total_output_tokens,
            "tokens_estimated": self.tokens_estimated,
            "request_throughput": per_s(self.completed),
            "request_goodput": None,
            "output_throughput": per_s(self.total_output_tokens),
            "total_token_throughput": per_s(self.total_input_tokens + self.total_output_tokens),
            "ttft_s": self.ttft_s.summary().to_json(),
            "tpot_s": self.tpot_s.summary().to_json(),
            "itl_s": {**self.itl_s.summary().to_json(), "max": self.itl_s.max},  # as bench_figures: the worst gap too
            "chunk_gaps_s": {**self.chunk_gaps_s.summary().to_json(), "max": self.chunk_gaps_s.max},
            "e2el_s": self.e2el_s.summary().to_json(),
            "peak_concurrent_requests": self.peak.final(),
        }


class EndlessRecord:
    """What an endless load keeps of its requests: figures over all of them, and a uniform sample of the raw ones."""

    def __init__(self, sample_size: int, rng: random.Random | None = None, exact_values: int = EXACT_VALUES) -> None:
        self.figures = LoadFigures(ttft_s=Distribution(exact_values), tpot_s=Distribution(exact_values),
                                   itl_s=Distribution(exact_values), chunk_gaps_s=Distribution(exact_values),
                                   e2el_s=Distribution(exact_values))
        self.sample: Reservoir[RequestTiming] = Reservoir(sample_size, rng)

    def add(self, index: int, timing: RequestTiming) -> None:
        """A request finished; `index` is its place in send order."""
        self.figures.add(timing)
        self.sample.offer(index, timing)

    def settle(self, horizon_unix: float) -> None:
        """No request still to finish was sent before `horizon_unix`: the peak's sweep can drop what is before it."""
        self.figures.peak.settle(horizon_unix)

    @property
    def total(self) -> int:
        return self.sample.seen

    def note(self) -> dict[str, Any]:
        return sample_note(len(self.sample), self.total, self.figures.exact)


@dataclass
class RequestFigures:
    """`records.summarize_requests` kept as requests finish (a UI session's summary), in bounded memory."""

    bursts_excluded: int = 0
    figures: dict[str, Distribution] = field(default_factory=lambda: {
        name: Distribution() for name in ("ttft_s", "itl_s", "chunk_gaps_s", "tpot_s", "e2e_s", "decode_tok_s",
                                          "prefill_tok_s")})

    def add(self, timing: RequestTiming) -> None:
        if not timing.ok:
            return
        if timing.burst:
            self.bursts_excluded += 1
            return
        for name, distribution in self.figures.items():
            if name in ("itl_s", "chunk_gaps_s"):
                distribution.extend(getattr(timing, name))
            else:
                distribution.add(getattr(timing, name))

    @property
    def exact(self) -> bool:
        return all(d.exact for d in self.figures.values())

    def summary(self) -> dict[str, Any]:
        """The dict `summarize_requests` returns over every request added."""
        return {"bursts_excluded": self.bursts_excluded,
                **{name: distribution.summary().to_json() for name, distribution in self.figures.items()}}


def sample_note(kept: int, of: int, exact: bool) -> dict[str, Any]:
    """The run's word on its raw requests: a sample of `kept` of `of`, and how exact the figures over all are."""
    return {
        "kept": kept,
        "of": of,
        "method": "uniform random sample (reservoir)" if kept < of else "all",
        "figures": "over all requests; percentiles exact" if exact else
                   f"over all requests; percentiles within {RELATIVE_ACCURACY * 100:.1f} % (log buckets past {EXACT_VALUES:,} values)",
    }
