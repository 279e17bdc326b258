"""The tuning loop's arithmetic: the figure each objective reads from a run's `bench` figures, and the best
of several settings by it. The worst gap (`itl_s.max`, the longest any stream waited for a token) is the one
that shows a long prompt's stall: a few gaps among thousands sit under any p99."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Objective:
    """What `--optimize` names: a figure of `tui.core.bench.bench_figures`, and which way is better."""

    name: str
    key: str
    quantile: str | None
    """The summary's quantile ("p99") for a distribution figure; None for a plain number."""
    lower_is_better: bool
    label: str

    def value(self, figures: dict | None) -> float | None:
        if not figures:
            return None
        figure = figures.get(self.key)
        value = figure.get(self.quantile) if self.quantile and isinstance(figure, dict) else figure
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


OBJECTIVES = {o.name: o for o in (
    Objective("ttft-p99", "ttft_s", "p99", True, "TTFT p99"),
    Objective("itl-p99", "itl_s", "p99", True, "ITL p99"),
    Objective("worst-gap", "itl_s", "max", True, "worst ITL gap"),
    Objective("throughput", "output_throughput", None, False, "output tok/s"),
    Objective("goodput", "request_goodput", None, False, "goodput req/s"),
)}


def best(figures: Sequence[dict | None], objective: Objective) -> int | None:
    """The index of the best setting by `objective` among those measured (a failed start has no figures);
    the first of equals; None when none has the figure."""
    scored = [(value, i) for i, f in enumerate(figures) if (value := objective.value(f)) is not None]
    if not scored:
        return None
    if objective.lower_is_better:
        return min(scored)[1]
    return max(scored, key=lambda pair: (pair[0], -pair[1]))[1]
