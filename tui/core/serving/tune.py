"""The tuning loop's arithmetic: the figure each objective reads from a run's `bench` figures, the best of
several settings by it, and how sure that lead is. The worst gap (`itl_s.max`, the longest any stream waited for a token) is the one
that shows a long prompt's stall: a few gaps among thousands sit under any p99."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tui.core.measure.uncertainty import BETTER, TIE, Clusters, Judged, judge
from tui.core.runs.run_record import draw_block_of, request_figures, request_samples


@dataclass(frozen=True, slots=True)
class Objective:
    """What `--optimize` names: a figure of `tui.core.measure.bench.bench_figures`, and which way is better."""

    name: str
    key: str
    quantile: str | None
    """The summary's quantile ("p99") for a distribution figure; None for a plain number."""
    lower_is_better: bool
    label: str

    def value(self, figures: dict[str, Any] | None) -> float | None:
        if not figures:
            return None
        figure = figures.get(self.key)
        value = figure.get(self.quantile) if self.quantile and isinstance(figure, dict) else figure
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


OBJECTIVES = {o.name: o for o in (
    Objective("ttft-p50", "ttft_s", "p50", True, "TTFT p50"),
    Objective("ttft-p99", "ttft_s", "p99", True, "TTFT p99"),
    Objective("itl-p50", "itl_s", "p50", True, "ITL p50"),
    Objective("itl-p99", "itl_s", "p99", True, "ITL p99"),
    Objective("worst-gap", "itl_s", "max", True, "worst ITL gap"),
    Objective("throughput", "output_throughput", None, False, "output tok/s"),
    Objective("goodput", "request_goodput", None, False, "goodput req/s"),
)}


def best(figures: Sequence[dict[str, Any] | None], objective: Objective) -> int | None:
    """The index of the best setting by `objective` among those measured (a failed start has no figures);
    the first of equals; None when none has the figure."""
    ranked = ranking(figures, objective)
    return ranked[0] if ranked else None


@dataclass(frozen=True, slots=True)
class Standing:
    """Where the settings stand: the leader by the objective's value, the runner-up, and how sure the lead is."""

    leader: int | None
    runner_up: int | None
    judged: Judged | None
    """The leader against the runner-up (`tui.core.measure.uncertainty`); None with fewer than two settings measured."""

    @property
    def separated(self) -> bool:
        """The lead holds (the leader is better than the runner-up), or no other setting was measured."""
        return self.leader is not None and (self.judged is None or self.judged.verdict == BETTER)

    @property
    def settled(self) -> bool:
        """Nothing more to run for: the lead holds, or the two are a tie."""
        return self.separated or (self.judged is not None and self.judged.verdict == TIE)


def standing(figures: Sequence[dict[str, Any] | None], requests: Sequence[list[dict[str, Any]]], round_values: Sequence[Sequence[float]],
             objective: Objective) -> Standing:
    """The leader and runner-up by `objective` over each setting's figures, and the lead judged over their draws: the
    requests' (blocks of time, `tui.core.runs.run_record.request_samples`) for a distribution figure, the rounds' for a figure a
    round has once (a throughput), from `round_values`."""
    ranked = ranking(figures, objective)
    if not ranked:
        return Standing(None, None, None)
    if len(ranked) == 1:
        return Standing(ranked[0], None, None)
    leader, runner_up = ranked[:2]
    if objective.quantile is None:
        samples: list[Clusters] = [[(value,) for value in round_values[i]] for i in (runner_up, leader)]
        stat = "mean"
    else:
        samples = [request_samples(requests[i], objective.key, draw_block_of(request_figures(requests[i])))
                   for i in (runner_up, leader)]
        stat = objective.quantile
    values = [objective.value(figures[i]) for i in (runner_up, leader)]
    counts = (_ok_count(requests[runner_up]), _ok_count(requests[leader])) if objective.quantile else None
    return Standing(leader, runner_up, judge(samples[0], samples[1], stat, values[0], values[1],
                                             higher_is_better=not objective.lower_is_better, requests=counts))


def _ok_count(requests: list[dict[str, Any]]) -> int:
    return sum(1 for r in requests if r.get("ok"))


def ranking(figures: Sequence[dict[str, Any] | None], objective: Objective) -> list[int]:
    """The measured settings' indexes, best first (the first of equals first)."""
    scored = [(value, i) for i, f in enumerate(figures) if (value := objective.value(f)) is not None]
    if objective.lower_is_better:
        return [i for _, i in sorted(scored)]
    return [i for _, i in sorted(scored, key=lambda pair: (-pair[0], pair[1]))]
