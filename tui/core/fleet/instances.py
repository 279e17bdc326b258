"""The fleet: one row per serving instance from Prometheus query results, the GPUs DCGM reports joined to them,
prefill/decode pools, and the saturated and slowest instances named. Pure: the queries run in tui.sources.prometheus.

A series that is not there is None ("no data") in its row, never an error: a fleet mixes engines, versions and
exporters, and a figure one of them lacks says nothing about the others.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tui.core.engines.known import engine_name_of, titles
from tui.core.fleet.gpus import FleetGpu, JoinRules, gpus_from, host_part
from tui.core.fleet.queries import GAUGE_FIELDS, HISTOGRAM_FIELDS, QUANTILES, RATE_FIELDS, Discovered, Sample, Want
from tui.core.hardware.server_ceiling import ServerCeiling, server_ceiling, simulator_ceiling
from tui.core.measure.stats import total_of_all
from tui.core.telemetry.metric_names import COUNTERS, GAUGES, HISTOGRAMS
from tui.core.telemetry.promstats import histogram_quantile, hit_rate, quantile_edge

SATURATED_KV_USAGE = 0.90
"""KV usage from which a fleet row is called saturated (with any request waiting): a fleet view warns while there
is still room to move load, before the single-server diagnosis's 95 %."""
NO_INSTANCES = f"no serving instances: no target exports {titles()} metrics, or none matches the filter"
"""What a fleet view says when it has no row."""

POOL_ORDER = ("prefill", "decode")
"""Pools in the order a request passes them; any other role after them, A→Z."""

SORT_COLUMNS = {
    "instance": "key", "engine": "engine", "model": "model", "role": "role", "status": "status", "host": "host",
    "running": "running", "waiting": "waiting", "kv": "kv_cache_usage", "ttft": "ttft_p99_s", "itl": "itl_p99_s",
    "gen": "generation_tok_s", "prompt": "prompt_tok_s", "dram": "dram_gbs", "decode": "decode_pct_of_ceiling",
}
"""`--sort` names → row attributes; numbers sort largest first, text A→Z, no data last."""


@dataclass(frozen=True, slots=True)
class Latency:
    """p50/p99 of one latency histogram over the rate window (Prometheus's histogram_quantile), and its mean.

    `edges` flags a quantile that is a bound, as `HistogramQuantiles.edges` does: "first" (≤ `first_le`),
    "last" (≥ `last_le`)."""

    p50_s: float | None = None
    p99_s: float | None = None
    mean_s: float | None = None
    edges: dict[str, str] = field(default_factory=dict)
    first_le: float | None = None
    last_le: float | None = None
    source: str | None = None
    """The raw histogram name it was read from."""
    bucket_rates: tuple[tuple[float, float], ...] = ()
    """(le, observations per second) summed over the instance's label sets: what a merged quantile adds up."""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        del out["bucket_rates"]
        return out


@dataclass(frozen=True, slots=True)
class FleetRow:
    """One serving instance (a scrape target exporting an engine's families)."""

    key: str
    """`job/instance`: unique within one Prometheus."""
    job: str
    instance: str
    host: str | None
    """The host part of the instance (by the join rules' label): what DCGM's GPUs are matched on."""
    url: str | None
    """The server's own base URL, from the target's scrape URL (None when /api/v1/targets does not list it)."""
    engine: str | None
    model: str | None
    role: str | None
    labels: dict[str, str]
    status: str
    """"up", "down" (Prometheus's `up` is 0), "restarted" (up, and its process start time changed in the lookback),
    or "unknown" (no `up` series)."""
    restarts: int | None
    started_unix: float | None
    last_error: str | None
    running: float | None
    waiting: float | None
    waiting_by_reason: dict[str, float]
    kv_cache_usage: float | None
    """Fraction 0–1."""
    prompt_tok_s: float | None
    generation_tok_s: float | None
    generation_tokens_total: float | None
    prefix_cache_hit_rate: float | None
    preemptions_per_s: float | None
    kv_transfer_tok_s: float | None
    """Prompt tokens per second a KV connector brought in from elsewhere (`source="external_kv_transfer"`)."""
    ttft: Latency
    itl: Latency
    gpus: tuple[FleetGpu, ...]
    gpu_shared_by: int
    """How many instances of this fleet share the host's GPUs (1: this one alone)."""
    dram_gbs: float | None
    peak_gbs: float | None
    ceiling: ServerCeiling | None
    decode_pct_of_ceiling: float | None
    """One stream's decode rate (1 ÷ mean ITL) as a % of the single-stream decode ceiling."""
    source_names: dict[str, str]

    @property
    def up(self) -> bool:
        return self.status in ("up", "restarted")

    @property
    def ttft_p99_s(self) -> float | None:
        return self.ttft.p99_s

    @property
    def itl_p99_s(self) -> float | None:
        return self.itl.p99_s

    @property
    def dram_pct_of_peak(self) -> float | None:
        return self.dram_gbs / self.peak_gbs * 100 if self.dram_gbs is not None and self.peak_gbs else None

    @property
    def saturated(self) -> bool:
        return self.up and bool((self.waiting or 0) > 0 or (self.kv_cache_usage or 0) >= SATURATED_KV_USAGE)

    def to_json(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__slots__ if name not in ("ttft", "itl", "gpus", "ceiling")}
        c = self.ceiling
        out.update(up=self.up, saturated=self.saturated, dram_pct_of_peak=self.dram_pct_of_peak,
                   ttft=self.ttft.to_json(), itl=self.itl.to_json(), gpus=[g.to_json() for g in self.gpus],
                   decode_ceiling_tok_s=c.decode_ceiling_tok_s if c else None, ceiling_line=c.line if c else None)
        return out


@dataclass(frozen=True, slots=True)
class Pool:
    """Instances that serve one role (prefill or decode, or whatever the role label says), and their load."""

    role: str
    instances: tuple[str, ...]
    running: float | None
    waiting: float | None
    kv_cache_usage: float | None
    """Mean over the pool's instances."""
    prompt_tok_s: float | None
    generation_tok_s: float | None
    ttft: Latency
    """Merged: quantiles of the pool's summed bucket rates."""
    itl: Latency

    def to_json(self) -> dict[str, Any]:
        return {**{name: getattr(self, name) for name in self.__slots__}, "ttft": self.ttft.to_json(), "itl": self.itl.to_json()}


@dataclass(frozen=True, slots=True)
class Fleet:
    """Every serving instance Prometheus knows, with its GPUs, pools and callouts, at one evaluation time."""

    t_unix: float
    instances: tuple[FleetRow, ...]
    gpus: tuple[FleetGpu, ...]
    """Every GPU DCGM reports, joined to an instance or not."""
    pools: tuple[Pool, ...]
    kv_transfer_tok_s: float | None
    """Prompt tokens per second the decode pool received over KV connectors; None with no connector metrics."""
    merged: dict[str, Latency]
    """"ttft" and "itl" of the whole fleet: quantiles of the summed bucket rates."""
    read_s: float | None = None
    """Seconds the read took (every query), measured by the source."""

    @property
    def saturated(self) -> tuple[str, ...]:
        return tuple(r.key for r in self.instances if r.saturated)

    @property
    def slowest(self) -> str | None:
        """The instance whose ITL p99 is the highest, when it is above every other one's and is not a bound that
        only says "within the first bucket" (then the figures do not tell them apart)."""
        timed = sorted(((r.itl.p99_s, r) for r in self.instances if r.up and r.itl.p99_s is not None),
                       key=lambda pair: pair[0], reverse=True)
        if len(timed) < 2 or timed[0][0] <= timed[1][0] or timed[0][1].itl.edges.get("p99") == "first":
            return None
        return timed[0][1].key

    def to_json(self) -> dict[str, Any]:
        return {
            "t_unix": self.t_unix, "read_s": self.read_s, "instances": [r.to_json() for r in self.instances],
            "pools": [p.to_json() for p in self.pools], "kv_transfer_tok_s": self.kv_transfer_tok_s,
            "merged": {name: lat.to_json() for name, lat in self.merged.items()}, "saturated": list(self.saturated), "slowest": self.slowest,
            "gpus": [g.to_json() for g in self.gpus],
        }


class Results:
    """Query results by `Want`, indexed per instance key (`job/instance`)."""

    def __init__(self, results: Mapping[Want, Sequence[Sample]]) -> None:
        self._by_key: dict[Want, dict[str, list[Sample]]] = {}
        self.raw = results
        for want, samples in results.items():
            index: dict[str, list[Sample]] = {}
            for labels, value in samples:
                index.setdefault(f"{labels.get('job', '')}/{labels.get('instance', '')}", []).append((labels, value))
            self._by_key[want] = index

    def samples(self, want: Want, key: str) -> list[Sample]:
        return self._by_key.get(want, {}).get(key, [])

    def value(self, want: Want, key: str) -> float | None:
        """The instance's one value, None when absent or NaN (a rate of nothing, a quantile of no observations)."""
        found = self.samples(want, key)
        if not found or math.isnan(found[0][1]):
            return None
        return found[0][1]


def read_fleet_results(t_unix: float, discovered: Mapping[str, Discovered], results: Mapping[Want, Sequence[Sample]],
                       targets: Mapping[str, Mapping[str, str]] | None = None, rules: JoinRules = JoinRules(),
                       role_label: str | None = None) -> Fleet:
    """The fleet from the instances discovered and the answers to `fleet_queries.plan`'s queries.

    `targets`: per `job/instance`, the target's `scrapeUrl` and `lastError` (/api/v1/targets), where known.
    `role_label`: a label naming each instance's role; without one, an instance receiving KV over a connector is
    "decode" and the others have no role.
    """
    answers = Results(results)
    gpus = gpus_from(answers.raw, rules)
    hosts = {key: host_part(d.labels.get(rules.instance_label, "")) for key, d in discovered.items()}
    sharing = {host: sum(1 for h in hosts.values() if h == host) for host in hosts.values()}
    rows = tuple(_row(d, answers, (targets or {}).get(key, {}), hosts[key] or None,
                      tuple(g for g in gpus if hosts[key] and g.host == hosts[key]), sharing.get(hosts[key], 1),
                      role_label)
                 for key, d in sorted(discovered.items()))
    decode = [r.kv_transfer_tok_s for r in rows if r.role == "decode" and r.kv_transfer_tok_s is not None]
    return Fleet(
        t_unix=t_unix,
        instances=rows,
        gpus=tuple(gpus),
        pools=_pools(rows),
        kv_transfer_tok_s=sum(decode) if decode else None,
        merged={name: merged_latency(rows, name) for name in ("ttft", "itl")},
    )


def _row(d: Discovered, answers: Results, target: Mapping[str, str], host: str | None, gpus: tuple[FleetGpu, ...],
         shared_by: int, role_label: str | None) -> FleetRow:
    key = d.key
    sources: dict[str, str] = {}

    def figure(kind: str, fieldname: str, candidates: Sequence[str], suffix: str = "") -> float | None:
        name = d.first_name(candidates, suffix)
        if name is None:
            return None
        sources[fieldname] = name
        return answers.value(Want(kind, fieldname, name), key)

    gauges = {f: figure("gauge", f, GAUGES[f]) for f in GAUGE_FIELDS}
    rates = {f: figure("rate", f, COUNTERS[f]) for f in RATE_FIELDS}
    hit = gauges["prefix_cache_hit_rate"]
    if hit is None:
        queries = rates["prefix_cache_queries_total"]
        if sources.get("prefix_cache_hits_total", "").startswith("llamacpp:") and rates["prompt_tokens_total"] is not None:
            queries = rates["prompt_tokens_total"] + (rates["prefix_cache_hits_total"] or 0.0)  # as metric_names derives it
        hit = hit_rate(rates["prefix_cache_hits_total"], queries)
    by_reason = {labels.get("reason", ""): v for labels, v in answers.samples(Want("by_label", "waiting", "vllm:num_requests_waiting_by_reason"), key)}
    kv_transfer = answers.value(Want("rate", "kv_transfer", "vllm:prompt_tokens_by_source_total"), key)
    gen_name = sources.get("generation_tokens_total")
    latencies = {f: _latency(d, answers, f) for f in HISTOGRAM_FIELDS}
    up = answers.value(Want("max", "up", "up"), key)
    changes = answers.value(Want("changes", "started", "process_start_time_seconds"), key)
    status = "unknown" if up is None else "down" if up < 1 else "restarted" if changes else "up"
    role = d.labels.get(role_label) if role_label else ("decode" if kv_transfer and kv_transfer > 0 else None)
    model = d.labels.get("model_name")
    ceiling = _ceiling(answers.samples(Want("info", "sim", "phasetop_sim_info"), key), model, gpus)
    itl_mean = latencies["itl_s"].mean_s
    decode_pct = None
    if ceiling is not None and ceiling.decode_ceiling_tok_s and itl_mean:
        decode_pct = 100 / itl_mean / ceiling.decode_ceiling_tok_s
    dram = [g.dram_gbs for g in gpus]
    peaks = [g.peak_gbs for g in gpus]
    scrape_url = target.get("scrapeUrl")
    return FleetRow(
        key=key, job=d.job, instance=d.instance, host=host,
        url=scrape_url.rsplit("/metrics", 1)[0] if scrape_url else None,
        engine=engine_name_of(sorted(d.names)), model=model, role=role, labels=dict(d.labels), status=status,
        restarts=int(changes) if changes is not None else None,
        started_unix=answers.value(Want("max", "started", "process_start_time_seconds"), key),
        last_error=target.get("lastError") or None,
        running=gauges["running"], waiting=gauges["waiting"], waiting_by_reason=by_reason,
        kv_cache_usage=gauges["kv_cache_usage"], prompt_tok_s=rates["prompt_tokens_total"],
        generation_tok_s=rates["generation_tokens_total"],
        generation_tokens_total=answers.value(Want("total", "generation_tokens_total", gen_name), key) if gen_name else None,
        prefix_cache_hit_rate=hit, preemptions_per_s=rates["preemptions_total"], kv_transfer_tok_s=kv_transfer,
        ttft=latencies["ttft_s"], itl=latencies["itl_s"], gpus=gpus, gpu_shared_by=shared_by,
        dram_gbs=total_of_all(dram),
        peak_gbs=total_of_all(peaks),
        ceiling=ceiling, decode_pct_of_ceiling=decode_pct,
        source_names={**sources, **{f: lat.source for f, lat in latencies.items() if lat.source}},
    )


def _latency(d: Discovered, answers: Results, fieldname: str) -> Latency:
    name = d.first_name(HISTOGRAMS[fieldname], "_count")
    if name is None:
        return Latency()
    buckets = tuple(sorted((float(labels["le"]), v) for labels, v in answers.samples(Want("buckets", fieldname, name), d.key)
                           if "le" in labels and math.isfinite(v)))
    values = {q: answers.value(Want(q, fieldname, name), d.key) for q, _ in QUANTILES}
    return _flagged(values, answers.value(Want("mean", fieldname, name), d.key), name, buckets)


def _flagged(values: dict[str, float | None], mean_s: float | None, name: str | None,
             buckets: tuple[tuple[float, float], ...]) -> Latency:
    """A Latency with its quantiles that sit on a bucket edge flagged (as promstats flags a single server's)."""
    edges = {q: edge for q, qv in QUANTILES if values[q] is not None and (edge := quantile_edge(qv, buckets))}
    finite = [le for le, _ in buckets if math.isfinite(le)]
    return Latency(values["p50"], values["p99"], mean_s, edges, finite[0] if finite else None,
                   finite[-1] if finite else None, name, buckets)


def _ceiling(sim_info: list[Sample], model: str | None, gpus: tuple[FleetGpu, ...]) -> ServerCeiling | None:
    """A phasetop simulator's own (its simulated device); else the model's on the peak bandwidth of the host's GPUs."""
    if sim_info:
        return simulator_ceiling(sim_info[0][0])
    peaks = total_of_all(g.peak_gbs for g in gpus)
    if not model or peaks is None:
        return None
    return server_ceiling(model, [], server_is_local=False, bandwidth_gbs=peaks)


def merged_latency(rows: Iterable[FleetRow], fieldname: str) -> Latency:
    """p50/p99 of several instances together: histogram_quantile over their bucket rates summed by `le` (what
    `histogram_quantile(q, sum by (le) (rate(…_bucket[1m])))` answers), over the instances of the histogram name
    most of them export (another engine's buckets have other bounds and do not add up). No mean: it is per row."""
    latencies = [getattr(r, fieldname) for r in rows if getattr(r, fieldname).bucket_rates]
    if not latencies:
        return Latency()
    names = [lat.source for lat in latencies]
    common = max(set(names), key=names.count)
    summed: dict[float, float] = {}
    for lat in latencies:
        if lat.source == common:
            for le, v in lat.bucket_rates:
                summed[le] = summed.get(le, 0.0) + v
    buckets = tuple(sorted(summed.items()))
    return _flagged({q: histogram_quantile(qv, buckets) for q, qv in QUANTILES}, None, common, buckets)


def _pools(rows: Sequence[FleetRow]) -> tuple[Pool, ...]:
    roles = sorted({r.role for r in rows if r.role}, key=lambda role: (POOL_ORDER.index(role) if role in POOL_ORDER else len(POOL_ORDER), role))
    pools = []
    for role in roles:
        members = [r for r in rows if r.role == role]
        kv = [r.kv_cache_usage for r in members if r.kv_cache_usage is not None]
        pools.append(Pool(
            role=role, instances=tuple(r.key for r in members),
            running=_total(r.running for r in members), waiting=_total(r.waiting for r in members),
            kv_cache_usage=sum(kv) / len(kv) if kv else None,
            prompt_tok_s=_total(r.prompt_tok_s for r in members), generation_tok_s=_total(r.generation_tok_s for r in members),
            ttft=merged_latency(members, "ttft"), itl=merged_latency(members, "itl"),
        ))
    return tuple(pools)


def _total(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def sort_rows(rows: Iterable[FleetRow], column: str) -> list[FleetRow]:
    """Rows by a `SORT_COLUMNS` name: numbers largest first, text A→Z, no data last. KeyError for an unknown column."""
    attribute = SORT_COLUMNS[column]
    rows = list(rows)
    known = [r for r in rows if getattr(r, attribute) is not None]
    missing = [r for r in rows if getattr(r, attribute) is None]
    numeric = all(isinstance(getattr(r, attribute), int | float) for r in known)
    return sorted(known, key=lambda r: getattr(r, attribute), reverse=numeric) + missing
