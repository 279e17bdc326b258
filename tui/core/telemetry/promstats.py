"""Rates, windowed histogram quantiles and restarts from two readings of a server's /metrics.

Counters that go down mean the server restarted: the increase is then the new value (counted from
zero), never a negative rate. After any detected restart nothing of the old process is a baseline
(see `build_snapshot`). Quantiles follow Prometheus's `histogram_quantile` on the bucket deltas, so
phasetop's p99 and a Grafana panel over the same window agree.
"""

from __future__ import annotations

import math

from tui.core.engines.vllm import PROMPT_SOURCES
from tui.core.telemetry.readings import (QUANTILES, Histogram, HistogramQuantiles, MetricsSnapshot, Restart,
                                         ServerReading)
from tui.core.telemetry.speculation import speculation_of

RESTART_COUNTERS = (
    "prompt_tokens_total", "generation_tokens_total", "prefix_cache_queries_total", "preemptions_total",
    "prompt_tokens_cached_total",
)
"""Counters whose fall means the server process started over."""

START_SLACK_S = 1.0
"""How far before the previous scrape a new process's start may read and still be taken as inside the
window: Linux derives process_start_time_seconds from a boot time in whole seconds."""


def counter_increase(previous: float, current: float) -> float:
    """How much a counter grew; after a reset, the current value (it restarted from zero)."""
    return current - previous if current >= previous else current


def rate(previous: float | None, current: float | None, window_s: float | None) -> float | None:
    """Per-second increase of a counter over the window; None without both values or a window."""
    if previous is None or current is None or not window_s or window_s <= 0:
        return None
    return counter_increase(previous, current) / window_s


def histogram_quantile(q: float, buckets: tuple[tuple[float, float], ...] | list[tuple[float, float]]) -> float | None:
    """Prometheus's histogram_quantile over cumulative (le, count) buckets; None when empty.

    Linear interpolation inside the bucket holding rank q × total; the first bucket starts at 0
    (or is returned as is when its bound is ≤ 0); a rank in +Inf returns the last finite bound.
    """
    ordered = sorted(buckets)
    if len(ordered) < 2 or not math.isinf(ordered[-1][0]):
        return None
    bounds = [le for le, _ in ordered]
    counts = _monotonic([c for _, c in ordered])
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    index = _bucket_index(counts, rank)
    if index == len(ordered) - 1:
        return bounds[-2]
    if index == 0 and bounds[0] <= 0:
        return bounds[0]
    start, end, count = 0.0, bounds[index], counts[index]
    if index > 0:
        start = bounds[index - 1]
        count -= counts[index - 1]
        rank -= counts[index - 1]
    if count <= 0:  # rank 0 in an empty first bucket (q = 0): Go's 0/0 is NaN there; its lower bound is the answer
        return start
    return start + (end - start) * (rank / count)


def _bucket_index(counts: list[float], rank: float) -> int:
    """The first finite bucket whose cumulative count reaches rank, else the +Inf bucket."""
    for i, count in enumerate(counts[:-1]):
        if count >= rank:
            return i
    return len(counts) - 1


def _monotonic(counts: list[float]) -> list[float]:
    """Cumulative counts can dip from scrape races; Prometheus carries the maximum forward."""
    out, high = [], 0.0
    for c in counts:
        high = max(high, c)
        out.append(high)
    return out


def quantile_edge(q: float, buckets: tuple[tuple[float, float], ...]) -> str | None:
    """"first" when q's rank lands in the first bucket, "last" when past the last finite one."""
    ordered = sorted(buckets)
    counts = _monotonic([c for _, c in ordered])
    if len(ordered) < 2 or counts[-1] <= 0:
        return None
    index = _bucket_index(counts, q * counts[-1])
    if index == 0:
        return "first"
    if index == len(ordered) - 1:
        return "last"
    return None


def histogram_delta(previous: Histogram | None, current: Histogram) -> Histogram:
    """Observations between two readings; if any bucket fell, the server restarted: all of current."""
    if previous is None:
        return current
    before = dict(previous.buckets)
    if current.count < previous.count or any(c < before.get(le, 0.0) for le, c in current.buckets):
        return current
    return Histogram(
        buckets=tuple((le, c - before.get(le, 0.0)) for le, c in current.buckets),
        count=current.count - previous.count,
        sum=current.sum - previous.sum,
    )


def window_quantiles(previous: Histogram | None, current: Histogram) -> HistogramQuantiles:
    """p50/p90/p99, mean and n over the window (since start when there is no previous reading)."""
    delta = histogram_delta(previous, current)
    finite = [le for le, _ in delta.buckets if math.isfinite(le)]
    values = {name: histogram_quantile(q, delta.buckets) for name, q in QUANTILES}
    edges = {name: edge for name, q in QUANTILES if values[name] is not None and (edge := quantile_edge(q, delta.buckets))}
    return HistogramQuantiles(
        **values,
        mean=delta.sum / delta.count if delta.count > 0 else None,
        n=delta.count,
        n_total=current.count,
        first_le=finite[0] if finite else None,
        last_le=finite[-1] if finite else None,
        edges=edges,
    )


def hit_rate(hits: float | None, queries: float | None) -> float | None:
    """hits / queries, None when nothing was asked."""
    if hits is None or not queries or queries <= 0:
        return None
    return min(1.0, max(0.0, hits / queries))


def prompt_cache_counters(counters: dict[str, float]) -> tuple[float, float, str] | None:
    """(prompt tokens from the prefix cache, all prompt tokens, the raw names) from vLLM's prompt-token counters;
    None without them.

    The `source` split of `vllm:prompt_tokens_by_source_total` (its three sources are every prompt token) where the
    server has it, its `local_cache_hit` alone: a disaggregated decode worker's KV pulled from a prefill worker
    (`external_kv_transfer`) is no prefix-cache hit, though `vllm:prompt_tokens_cached_total` counts it ("local +
    external"). Else that counter over `vllm:prompt_tokens_total` (which counts cached tokens too).
    """
    by_source = {s: counters[f"prompt_tokens_{s}_total"] for s in PROMPT_SOURCES if f"prompt_tokens_{s}_total" in counters}
    if "local_compute" in by_source:
        return (by_source.get("local_cache_hit", 0.0), sum(by_source.values()),
                'vllm:prompt_tokens_by_source_total{source="local_cache_hit"} / vllm:prompt_tokens_by_source_total')
    cached = counters.get("prompt_tokens_cached_total")
    if cached is None or "prompt_tokens_total" not in counters:
        return None
    return cached, counters["prompt_tokens_total"], "vllm:prompt_tokens_cached_total / vllm:prompt_tokens_total"


def cached_prompt_tokens(before: ServerReading, after: ServerReading) -> int | None:
    """Prompt tokens the server served from its prefix cache between two readings of its /metrics.

    From the prompt-token counters (`prompt_cache_counters`: a KV transfer is no cache hit) where the server has
    them (vLLM ≥ 0.11), else the growth of `prefix_cache_hits_total` (older vLLM, llama.cpp). Around one request
    alone on the server this is that request's cached tokens, for a reply whose usage has no `cached_tokens`.
    None when neither reading has such a counter, or the server restarted between them (the growth is then unknown).
    """
    if restart_reasons(before, after):
        return None
    old, new = prompt_cache_counters(before.counters), prompt_cache_counters(after.counters)
    if old is not None and new is not None:
        return round(new[0] - old[0])
    for name in ("prompt_tokens_cached_total", "prefix_cache_hits_total"):
        if name in before.counters and name in after.counters:
            return round(after.counters[name] - before.counters[name])
    return None


def restart_reasons(previous: ServerReading, current: ServerReading) -> tuple[str, ...]:
    """Why current looks like a different server process than previous; empty when it does not."""
    reasons = []
    fallen = [n for n in RESTART_COUNTERS if n in previous.counters and current.counters.get(n, math.inf) < previous.counters[n]]
    if fallen:
        reasons.append(f"counters reset ({', '.join(fallen)})")
    if previous.process_start_s is not None and current.process_start_s not in (None, previous.process_start_s):
        reasons.append("process_start_time_seconds changed")
    if _info_config(previous) != _info_config(current):
        reasons.append("cache_config_info changed")
    return tuple(reasons)


def _info_config(reading: ServerReading) -> dict[str, str]:
    """Config from the scrape itself (not /v1/models, which is re-read only after a restart)."""
    return {k: v for k, v in reading.engine_config.items() if k != "max_model_len"}


def time_since_restart(previous: ServerReading, current: ServerReading) -> float | None:
    """Seconds the new process had run at current, when its start lies between the two scrapes; else None.

    None when the server gives no start time, or one that cannot be placed in the window (the same
    start as before, or another clock's skew), since then the new process's time base is unknown.
    """
    if current.process_start_s is None:
        return None
    window_s = current.t_mono - previous.t_mono
    alive_s = current.t_unix - current.process_start_s
    if 0 < alive_s <= window_s + START_SLACK_S:
        return min(alive_s, window_s)
    return None


def build_snapshot(previous: ServerReading | None, current: ServerReading, restart: Restart | None = None) -> MetricsSnapshot:
    """The canonical snapshot of current, with rates and quantiles over the window since previous.

    After a restart, previous belongs to the old process and is no baseline for anything: counters
    count from zero and quantiles use all of the new process's buckets (old totals subtracted from
    new ones that have already passed them would read too low, unflagged). The window is then the
    new process's life, when its start time places it between the scrapes; otherwise it is unknown
    and, as on a first scrape, `window_s` and the rates are None for this one snapshot rather than
    the new total over the scrape gap (a rate too low by however long the server was down).
    """
    if previous is None:
        window_s = None
    elif restart is not None:
        window_s = time_since_restart(previous, current)
    else:
        window_s = current.t_mono - previous.t_mono
    baseline = previous if restart is None else None
    before = baseline.counters if baseline is not None else {}
    now = current.counters

    def counter_rate(name: str) -> float | None:
        return rate(before.get(name) if baseline is not None else 0.0, now.get(name), window_s)

    source_names = dict(current.source_names)
    gauge_hit_rate = current.gauges.get("prefix_cache_hit_rate")
    window_hit_rate = None
    total_hit_rate = hit_rate(now.get("prefix_cache_hits_total"), now.get("prefix_cache_queries_total"))
    cache_now = prompt_cache_counters(now)
    if cache_now is not None:
        # Cached over all prompt tokens: what the prompts got from the cache, counted by vLLM where it serves them.
        cache_before = prompt_cache_counters(before) or (0.0, 0.0, "")
        total_hit_rate = hit_rate(cache_now[0], cache_now[1])
        if previous is not None:
            window_hit_rate = hit_rate(counter_increase(cache_before[0], cache_now[0]), counter_increase(cache_before[1], cache_now[1]))
        source_names["prefix_cache_hit_rate"] = cache_now[2]
    elif previous is not None and "prefix_cache_hits_total" in now:
        window_hit_rate = hit_rate(
            counter_increase(before.get("prefix_cache_hits_total", 0.0), now["prefix_cache_hits_total"]),
            counter_increase(before.get("prefix_cache_queries_total", 0.0), now.get("prefix_cache_queries_total", 0.0)),
        )
    if "prefix_cache_hit_rate" not in source_names and "prefix_cache_hits_total" in source_names:
        source_names["prefix_cache_hit_rate"] = (
            f"{source_names['prefix_cache_hits_total']} / {source_names.get('prefix_cache_queries_total', '?')}"
        )
    est_read_bps = counter_rate("est_read_bytes_total") if now.get("est_read_bytes_total") else None
    if "est_read_bytes_total" in source_names:
        source_names["est_read_gbs"] = source_names["est_read_bytes_total"]
    est_flops_per_s = counter_rate("est_flops_total") if now.get("est_flops_total") else None
    if "est_flops_total" in source_names:
        source_names["est_flops_per_s"] = source_names["est_flops_total"]
    kv_size = current.gauges.get("kv_cache_size_tokens")
    kv_usage = current.gauges.get("kv_cache_usage")
    previous_histograms = baseline.histograms if baseline is not None else {}
    return MetricsSnapshot(
        t_unix=current.t_unix,
        engine=current.engine,
        window_s=window_s,
        running=current.gauges.get("running"),
        waiting=current.gauges.get("waiting"),
        kv_cache_usage=current.gauges.get("kv_cache_usage"),
        preemptions_total=now.get("preemptions_total"),
        prompt_tokens_total=now.get("prompt_tokens_total"),
        generation_tokens_total=now.get("generation_tokens_total"),
        prompt_tok_s=counter_rate("prompt_tokens_total"),
        generation_tok_s=counter_rate("generation_tokens_total"),
        preemptions_per_s=counter_rate("preemptions_total"),
        prefix_cache_hit_rate=gauge_hit_rate if gauge_hit_rate is not None else window_hit_rate,
        prefix_cache_hit_rate_total=total_hit_rate,
        histograms={
            name: window_quantiles(previous_histograms.get(name), histogram)
            for name, histogram in current.histograms.items()
        },
        engine_config=dict(current.engine_config),
        source_names=source_names,
        restart=restart,
        waiting_capacity=current.gauges.get("waiting_capacity"),
        waiting_deferred=current.gauges.get("waiting_deferred"),
        kv_cache_size_tokens=kv_size,
        kv_cache_used_tokens=kv_usage * kv_size if kv_usage is not None and kv_size is not None else None,
        prompt_tokens_cached_total=cache_now[0] if cache_now is not None else None,
        prompt_tokens_by_source={
            s: now[f"prompt_tokens_{s}_total"] for s in PROMPT_SOURCES if f"prompt_tokens_{s}_total" in now
        },
        est_read_gbs=est_read_bps / 1e9 if est_read_bps is not None else None,
        est_flops_per_s=est_flops_per_s,
        speculation=speculation_of(before, now),
    )
