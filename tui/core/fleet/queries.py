"""Which PromQL queries read a fleet: the families each instance exports decide which metric names are asked for.

Reading a fleet is two steps. First the series of every metric name phasetop maps (tui.core.telemetry.metric_names)
over the lookback say which instance exports which family (`discover`); then `plan` builds one query per
figure and per name some instance exports, so a vLLM fleet is not asked for SGLang's names. Each instance
later takes its figure from the first name in metric_names' order of preference that it exports, as a
single server's scrape does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from tui.core.fleet import promql
from tui.core.fleet.promql import Matcher
from tui.core.telemetry.metric_names import (
    COUNTERS,
    FRACTION_GAUGES,
    GAUGES,
    HISTOGRAMS,
    LABELLED_COUNTERS,
    LABELLED_GAUGES,
    PROCESS_START,
)

GAUGE_FIELDS = ("running", "waiting", "kv_cache_usage", "prefix_cache_hit_rate")
RATE_FIELDS = ("prompt_tokens_total", "generation_tokens_total", "preemptions_total", "prefix_cache_queries_total",
               "prefix_cache_hits_total")
TOTAL_FIELDS = ("generation_tokens_total",)
"""Counters also read as they stand: a total compares exactly with the server's own /metrics."""
HISTOGRAM_FIELDS = ("ttft_s", "itl_s")
WAITING_BY_REASON = LABELLED_GAUGES["waiting_capacity"][:2]
"""(vLLM's waiting-by-reason gauge, its `reason` label)."""
KV_TRANSFER = LABELLED_COUNTERS["prompt_tokens_external_kv_transfer_total"]
"""(counter, label, value) of prompt tokens a KV connector brought in: a decode instance of a disaggregated pair."""
SIM_INFO = "phasetop_sim_info"
"""A phasetop simulator's info gauge: its simulated device and model give its ceiling."""
QUANTILES = (("p50", 0.5), ("p99", 0.99))

DCGM_FIELDS = {
    "dram_active": "DCGM_FI_PROF_DRAM_ACTIVE",
    "fb_used_mib": "DCGM_FI_DEV_FB_USED",
    "sm_active": "DCGM_FI_PROF_SM_ACTIVE",
    "tensor_active": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
}
"""Per-GPU fields ← NVIDIA dcgm-exporter's names: fractions 0–1, except framebuffer used in MiB."""


class Want(NamedTuple):
    """What one query answers: a kind of figure, the canonical field, the raw name it reads."""

    kind: str
    field: str
    name: str


Sample = tuple[dict[str, str], float]
"""One element of an instant vector: its labels and value."""


def family_names() -> tuple[str, ...]:
    """Every series name whose presence says an instance serves, and which engine and names it speaks."""
    names = [n for f in GAUGE_FIELDS for n in GAUGES[f]] + [n for f in RATE_FIELDS for n in COUNTERS[f]]
    names += [f"{n}_count" for f in HISTOGRAM_FIELDS for n in HISTOGRAMS[f]]
    names += [WAITING_BY_REASON[0], KV_TRANSFER[0], SIM_INFO]
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True, slots=True)
class Discovered:
    """One serving instance as its series over the lookback show it."""

    job: str
    instance: str
    names: frozenset[str]
    """Raw series names it exported (histograms by their `_count` series)."""
    labels: dict[str, str] = field(default_factory=dict)
    """Labels its series share (job, instance, model_name, a role or cluster label), minus per-series ones."""

    @property
    def key(self) -> str:
        return f"{self.job}/{self.instance}"

    def first_name(self, candidates: Iterable[str], suffix: str = "") -> str | None:
        """The first candidate it exports, in metric_names' order of preference."""
        return next((n for n in candidates if n + suffix in self.names), None)


def discover(series: Iterable[dict[str, str]]) -> dict[str, Discovered]:
    """Serving instances by key (`job/instance`) from the label sets of their family series (/api/v1/series)."""
    names: dict[tuple[str, str], set[str]] = {}
    common: dict[tuple[str, str], dict[str, str]] = {}
    for labels in series:
        if "__name__" not in labels or "instance" not in labels:
            continue
        key = (labels.get("job", ""), labels["instance"])
        names.setdefault(key, set()).add(labels["__name__"])
        if labels["__name__"] == SIM_INFO:
            continue  # its labels are the simulator's flags, not the engine's (no model_name)
        rest = {k: v for k, v in labels.items() if k != "__name__"}
        shared = common.get(key)
        common[key] = rest if shared is None else {k: v for k, v in shared.items() if rest.get(k) == v}
    found = [Discovered(job, instance, frozenset(n), common.get((job, instance), {})) for (job, instance), n in names.items()]
    return {d.key: d for d in sorted(found, key=lambda d: d.key)}


def plan(instances: Iterable[Discovered], matchers: Sequence[Matcher] = (), window: str = "1m",
         lookback: str = "10m") -> dict[Want, str]:
    """The queries for these instances' figures: per field, one per name some instance exports (and would use)."""
    instances = list(instances)
    used = {n for d in instances for n in d.names}
    wants: dict[Want, str] = {}

    def chosen(candidates: Sequence[str], suffix: str = "") -> list[str]:
        return sorted({name for d in instances if (name := d.first_name(candidates, suffix))})

    for f in GAUGE_FIELDS:
        for name in chosen(GAUGES[f]):
            wants[Want("gauge", f, name)] = promql.gauge_query(name, matchers, fraction=f in FRACTION_GAUGES)
    for f in RATE_FIELDS:
        for name in chosen(COUNTERS[f]):
            wants[Want("rate", f, name)] = promql.rate_query(name, matchers, window)
            if f in TOTAL_FIELDS:
                wants[Want("total", f, name)] = promql.gauge_query(name, matchers)
    for f in HISTOGRAM_FIELDS:
        for name in chosen(HISTOGRAMS[f], "_count"):
            for q_name, q in QUANTILES:
                wants[Want(q_name, f, name)] = promql.quantile_query(q, name, matchers, window)
            wants[Want("buckets", f, name)] = promql.bucket_rates_query(name, matchers, window)
            wants[Want("mean", f, name)] = promql.mean_query(name, matchers, window)
    if WAITING_BY_REASON[0] in used:
        wants[Want("by_label", "waiting", WAITING_BY_REASON[0])] = promql.by_label_query(*WAITING_BY_REASON, matchers)
    if KV_TRANSFER[0] in used:
        wants[Want("rate", "kv_transfer", KV_TRANSFER[0])] = promql.source_rate_query(*KV_TRANSFER, matchers, window)
    if SIM_INFO in used:
        wants[Want("info", "sim", SIM_INFO)] = promql.selector(SIM_INFO, matchers)
    wants[Want("max", "up", "up")] = promql.max_query("up", matchers)
    wants[Want("max", "started", PROCESS_START)] = promql.max_query(PROCESS_START, matchers)
    wants[Want("changes", "started", PROCESS_START)] = promql.changes_query(PROCESS_START, matchers, lookback)
    for f, name in DCGM_FIELDS.items():
        wants[Want("dcgm", f, name)] = name
    return wants
