"""`/metrics` text for families of a fixed shape: prometheus_client renders them once, and a scrape fills in the values.

`generate_latest` walks every family and sample on each scrape: 2–5 ms for vLLM's ~300 series on this machine, on
the loop that times the engine's steps, so a scrape could push a step past its deadline. A simulator's series never
change shape (names, labels, buckets), only value. So the library renders them once, with a distinct stand-in value
in each sample, and that text becomes a template. A scrape reads the values (a snapshot: the loop runs nothing else
meanwhile) and formats them into it with the library's own `floatToGoString`: about 0.1 ms, and exactly the bytes
`generate_latest` would write. Not elsewhere: a thread still needs the GIL, and the loop can then wait up to the
switch interval (5 ms) to get it back; a helper process would need the same snapshot sent to it, and on the
simulator's one core it would compete with the loop. At 0.1 ms the work fits in the room the engine's early wake-up
leaves before each deadline (`engine.TIMER_SLACK_S`, 1.5 ms), so a scrape served just before a wake-up still ends
before the deadline.
"""

from __future__ import annotations

import copy
import functools
import math
import time
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

TEXTS_MAX = 4096
"""Formatted values an `Exposition` keeps; past it, it starts again."""


@dataclass(frozen=True, slots=True)
class Series:
    """One metric family as prometheus_client describes it, and where the current values of its samples come from."""

    family: Metric
    """Name, documentation, type and every sample's name and labels (the samples' own values are never read)."""
    values: Callable[[], Sequence[float]]
    """The current value of each of `family`'s samples, in their order."""


class Histogram:
    """A histogram over plain numbers (vLLM's buckets, +Inf added): the counts and sum that `Series` reads."""

    __slots__ = ("bounds", "counts", "sum", "created")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = (*bounds, math.inf)
        self.counts = [0] * len(self.bounds)
        """Observations per bucket, not cumulative."""
        self.sum = 0.0
        self.created = time.time()
        """When it was made: its `_created` sample, as prometheus_client stamps a histogram's."""

    def observe(self, amount: float, count: int = 1) -> None:
        """`count` observations of `amount` (in the lowest bucket that holds it, as prometheus_client files them)."""
        self.counts[bisect_left(self.bounds, amount)] += count
        self.sum += amount * count

    def values(self) -> list[float]:
        """Cumulative buckets, count, sum, created: the samples of `histogram()`'s family, in its order."""
        cumulative = list(accumulate(self.counts))
        return [*cumulative, cumulative[-1], self.sum, self.created]


def histogram(name: str, documentation: str, labels: Mapping[str, str], of: Histogram) -> Series:
    """A histogram family with the samples prometheus_client's own `Histogram` gives, in the same order."""
    family = Metric(name, documentation, "histogram")
    for bound in of.bounds:
        family.add_sample(f"{name}_bucket", {**labels, "le": floatToGoString(bound)}, 0)
    for suffix in ("_count", "_sum", "_created"):
        family.add_sample(name + suffix, dict(labels), 0)
    return Series(family, of.values)


def gauge(name: str, documentation: str, labels: Mapping[str, str], read: Callable[[], float],
          by: tuple[str, Sequence[str]] | None = None) -> Series:
    """A gauge family: one sample with `labels`; or, with `by` (a label and its values), one sample for each of
    those values, and `read` returns a sequence of them in the same order."""
    family = Metric(name, documentation, "gauge")
    for extra in _each(by):
        family.add_sample(name, {**labels, **extra}, 0)
    return Series(family, read if by is not None else lambda: (read(),))


def counter(name: str, documentation: str, labels: Mapping[str, str], read: Callable[[], float],
            created: float | None = None, by: tuple[str, Sequence[str]] | None = None) -> Series:
    """A counter family as `CounterMetricFamily.add_metric` builds it: `name_total` (and `name_created`, with
    `created`) per sample; `by` and `read` as for `gauge`."""
    family = Metric(name, documentation, "counter")
    for extra in _each(by):
        family.add_sample(f"{name}_total", {**labels, **extra}, 0)
        if created is not None:
            family.add_sample(f"{name}_created", {**labels, **extra}, 0)
    values = read if by is not None else lambda: (read(),)
    if created is None:
        return Series(family, values)
    return Series(family, lambda: [x for value in values() for x in (value, created)])


def _each(by: tuple[str, Sequence[str]] | None) -> list[dict[str, str]]:
    return [{}] if by is None else [{by[0]: value} for value in by[1]]


def _with_values(series: Sequence[Series], values: Sequence[float]) -> list[Metric]:
    """The families with these values in their samples (one value per sample, across them all, in order)."""
    families, start = [], 0
    for one in series:
        family = copy.copy(one.family)
        end = start + len(family.samples)
        family.samples = [sample._replace(value=value) for sample, value in zip(one.family.samples, values[start:end])]
        families.append(family)
        start = end
    return families


def merged(groups: Sequence[Sequence[Series]]) -> list[Series]:
    """Several sources' families merged by name, in the order first seen; a sample seen already (same name and
    labels, from an earlier source) is left out, so a series common to all of them appears once."""
    parts: dict[str, list[tuple[Series, list[int]]]] = {}
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for group in groups:
        for one in group:
            kept = []
            for index, sample in enumerate(one.family.samples):
                key = (sample.name, tuple(sorted(sample.labels.items())))
                if key not in seen:
                    seen.add(key)
                    kept.append(index)
            parts.setdefault(one.family.name, []).append((one, kept))
    series = []
    for sources in parts.values():
        family = copy.copy(sources[0][0].family)
        family.samples = [one.family.samples[index] for one, kept in sources for index in kept]
        series.append(Series(family, functools.partial(_kept_values, sources)))
    return series


def _kept_values(sources: list[tuple[Series, list[int]]]) -> list[float]:
    values = []
    for one, kept in sources:
        current = one.values()
        values.extend(current[index] for index in kept)
    return values


class _Families:
    """What `generate_latest` takes: anything with `collect()`."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def generated(series: Sequence[Series], values: Sequence[float]) -> bytes:
    """What prometheus_client's `generate_latest` writes for these families with these values."""
    return generate_latest(_Families(_with_values(series, values)))


class Exposition:
    """The text format of a fixed list of `Series`, byte for byte as `generate_latest` writes it, from a template."""

    def __init__(self, series: Sequence[Series]) -> None:
        self.series = tuple(series)
        self.count = sum(len(one.family.samples) for one in self.series)
        stand_ins = [index + 0.5 for index in range(self.count)]  # distinct, and each formats distinctly
        slot_of = {floatToGoString(value): index for index, value in enumerate(stand_ins)}
        static, self.order = [""], []
        for line in generated(self.series, stand_ins).decode().splitlines(keepends=True):
            if line.startswith("#"):
                static[-1] += line
                continue
            head, _, value = line.rstrip("\n").rpartition(" ")  # a sample line: `name{labels} value`, no timestamp
            static[-1] += head + " "
            static.append("\n")
            self.order.append(slot_of[value])
        if sorted(self.order) != list(range(self.count)):
            raise ValueError("a sample is missing from the rendered template")
        self._parts = [""] * (2 * self.count + 1)
        """The text in pieces: the fixed text at even indices, each scrape's values at the odd ones (in text order:
        `order` says which sample's)."""
        self._parts[0::2] = static
        self._texts: dict[float, str] = {}
        """`floatToGoString` of values seen lately: most repeat from scrape to scrape (zeros, timestamps, the buckets
        a count has passed), and formatting is most of a scrape's time. No series holds -0.0, which as a key would
        pass for 0.0."""

    def values(self) -> list[float]:
        """Every sample's current value, in the series' order."""
        values = [value for one in self.series for value in one.values()]
        if len(values) != self.count:
            raise ValueError(f"{len(values)} values for {self.count} samples")
        return values

    def render(self) -> bytes:
        """The text as of now: a snapshot of every value, taken in one go."""
        values = self.values()
        texts = self._texts
        if len(texts) > TEXTS_MAX:
            texts.clear()
        out = []
        for index in self.order:
            value = values[index]
            text = texts.get(value)
            if text is None:
                text = texts[value] = floatToGoString(value)
            out.append(text)
        parts = self._parts
        parts[1::2] = out
        return "".join(parts).encode()
