"""Records of what the server, the GPUs and the host reported: frozen, JSON-ready, no IO.

Server metrics come in two layers: a `ServerReading` is one scrape mapped to canonical names with
the cumulative values the server gave; a `MetricsSnapshot` is what a person reads, with rates and
quantiles over the window between two readings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tui.core.telemetry.speculation import Speculation

SATURATED_KV_USAGE = 0.95
"""KV usage at or past this, with requests waiting, is a server out of KV room (the saturation signature)."""


@dataclass(frozen=True, slots=True)
class Histogram:
    """One histogram summed over its label sets: cumulative counts per upper bound, +Inf last."""

    buckets: tuple[tuple[float, float], ...]
    """(le, cumulative count) pairs sorted by le, as read from the scrape."""
    count: float
    sum: float


@dataclass(frozen=True, slots=True)
class ServerReading:
    """One /metrics scrape in canonical names, values cumulative as the server gave them."""

    t_mono: float
    """time.monotonic() when the scrape's answer arrived; windows are measured on it."""
    t_unix: float
    engine: str | None
    """"vllm", "sglang", "llamacpp", "tgi", or None when no known metric was found."""
    gauges: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, Histogram] = field(default_factory=dict)
    source_names: dict[str, str] = field(default_factory=dict)
    """Canonical field → the raw metric name that fed it."""
    engine_config: dict[str, str] = field(default_factory=dict)
    """`vllm:cache_config_info` labels and friends, plus `max_model_len` from /v1/models."""
    process_start_s: float | None = None
    """`process_start_time_seconds`; a change means the server process was restarted."""


QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


@dataclass(frozen=True, slots=True)
class HistogramQuantiles:
    """p50/p90/p99 of one server histogram over a window, interpolated as Prometheus does.

    `edges` flags quantiles that are bounds, not values: "first" means the quantile fell in the
    first bucket, so the true value is at most `first_le` (vLLM's phase histograms start at 0.3 s);
    "last" means it fell past the last finite bucket, so the true value is at least `last_le`.
    """

    p50: float | None
    p90: float | None
    p99: float | None
    mean: float | None
    n: float
    """Observations in the window."""
    n_total: float
    """Observations since the server started."""
    first_le: float | None
    last_le: float | None
    edges: dict[str, str] = field(default_factory=dict)
    """Quantile name ("p50") → "first" or "last", only for flagged quantiles."""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["edges"] = dict(self.edges)
        return out


@dataclass(frozen=True, slots=True)
class Restart:
    """The server restarted between two scrapes: why we think so, and its config before and after."""

    reasons: tuple[str, ...]
    old_config: dict[str, str]
    new_config: dict[str, str]

    @property
    def config_changes(self) -> dict[str, tuple[str | None, str | None]]:
        """Keys whose value differs: key → (old, new)."""
        keys = sorted(set(self.old_config) | set(self.new_config))
        return {
            k: (self.old_config.get(k), self.new_config.get(k))
            for k in keys
            if self.old_config.get(k) != self.new_config.get(k)
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "reasons": list(self.reasons),
            "old_config": dict(self.old_config),
            "new_config": dict(self.new_config),
            "config_changes": {k: {"old": o, "new": n} for k, (o, n) in self.config_changes.items()},
        }


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """SPEC's canonical server metrics at one scrape, rates and quantiles over `window_s`."""

    t_unix: float
    engine: str | None
    window_s: float | None
    """Seconds between the two scrapes the rates and quantiles span (after a restart, the new process's
    life); None: no window (first scrape, or a restart whose start time is unknown)."""
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None
    """Fraction 0–1 of the KV pool in use (mean over engines)."""
    preemptions_total: float | None = None
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    prompt_tok_s: float | None = None
    generation_tok_s: float | None = None
    preemptions_per_s: float | None = None
    prefix_cache_hit_rate: float | None = None
    """Hits / queries over the window (vLLM counters), or the server's own gauge (SGLang)."""
    prefix_cache_hit_rate_total: float | None = None
    """Hits / queries since the server started."""
    histograms: dict[str, HistogramQuantiles] = field(default_factory=dict)
    """"ttft_s", "itl_s", "e2e_s", "queue_s", "prefill_s", "decode_s" → quantiles over the window."""
    engine_config: dict[str, str] = field(default_factory=dict)
    source_names: dict[str, str] = field(default_factory=dict)
    restart: Restart | None = None
    """Set on the first snapshot after a detected restart; its rates and quantiles cover only the new process."""
    waiting_capacity: float | None = None
    """Requests waiting for room in the batch or the KV pool (vLLM's `reason="capacity"`); None when not reported."""
    waiting_deferred: float | None = None
    """Requests the scheduler set aside for another reason (vLLM's `reason="deferred"`); they do not mean a full pool."""
    kv_cache_size_tokens: float | None = None
    """Tokens the KV pool holds, over all engines (`kv_cache_size_tokens` of `vllm:cache_config_info`)."""
    kv_cache_used_tokens: float | None = None
    """About how many of them are in use: usage × size (usage is counted in blocks, so it rounds up)."""
    prompt_tokens_cached_total: float | None = None
    """Prompt tokens served from a cache (local or external) since the server started."""
    prompt_tokens_by_source: dict[str, float] = field(default_factory=dict)
    """Prompt tokens since start by where they came from: "local_compute", "local_cache_hit", "external_kv_transfer"."""
    est_read_gbs: float | None = None
    """vLLM's model-based estimate of bytes read per GPU, GB/s over the window (`--enable-mfu-metrics`); None when
    the counter is absent or still 0 (the flag is off). An estimate from the model's shape, not a measurement."""
    est_flops_per_s: float | None = None
    """The same flag's estimate of FLOPs per GPU, FLOP/s over the window; None when absent or still 0."""
    speculation: Speculation | None = None
    """How the server speculates (acceptance, tokens a step, by position); None for one that does not."""

    @property
    def saturated(self) -> bool:
        """The saturation signature: requests wait while the KV pool is (nearly) full.

        Where the server says why requests wait, only those waiting for capacity count: deferred ones
        wait on something else (a KV transfer, a grammar), not on a full pool.
        """
        waiting = self.waiting_capacity if self.waiting_capacity is not None else self.waiting
        return bool(waiting and self.kv_cache_usage is not None and self.kv_cache_usage >= SATURATED_KV_USAGE)

    def to_json(self) -> dict[str, Any]:
        return {
            "t_unix": self.t_unix,
            "engine": self.engine,
            "window_s": self.window_s,
            "running": self.running,
            "waiting": self.waiting,
            "kv_cache_usage": self.kv_cache_usage,
            "saturated": self.saturated,
            "preemptions_total": self.preemptions_total,
            "prompt_tokens_total": self.prompt_tokens_total,
            "generation_tokens_total": self.generation_tokens_total,
            "prompt_tok_s": self.prompt_tok_s,
            "generation_tok_s": self.generation_tok_s,
            "preemptions_per_s": self.preemptions_per_s,
            "prefix_cache_hit_rate": self.prefix_cache_hit_rate,
            "prefix_cache_hit_rate_total": self.prefix_cache_hit_rate_total,
            **{name: q.to_json() for name, q in self.histograms.items()},
            "engine_config": dict(self.engine_config),
            "source_names": dict(self.source_names),
            "restart": self.restart.to_json() if self.restart else None,
            "waiting_capacity": self.waiting_capacity,
            "waiting_deferred": self.waiting_deferred,
            "kv_cache_size_tokens": self.kv_cache_size_tokens,
            "kv_cache_used_tokens": self.kv_cache_used_tokens,
            "prompt_tokens_cached_total": self.prompt_tokens_cached_total,
            "prompt_tokens_by_source": dict(self.prompt_tokens_by_source),
            "est_read_gbs": self.est_read_gbs,
            "est_flops_per_s": self.est_flops_per_s,
            "speculation": self.speculation.to_json() if self.speculation is not None else None,
        }


def waiting_text(s: MetricsSnapshot) -> str:
    """"5", or "5 (4 for capacity, 1 deferred)" where the server says why they wait; "–" when unknown."""
    if s.waiting is None:
        return "–"
    if s.waiting_capacity is None and s.waiting_deferred is None:
        return f"{s.waiting:.0f}"
    return f"{s.waiting:.0f} ({s.waiting_capacity or 0:.0f} for capacity, {s.waiting_deferred or 0:.0f} deferred)"


def kv_tokens_text(s: MetricsSnapshot) -> str:
    """"31,785 of 32,768 tokens" where the pool's size is known; "" otherwise."""
    if s.kv_cache_used_tokens is None or s.kv_cache_size_tokens is None:
        return ""
    return f"{s.kv_cache_used_tokens:,.0f} of {s.kv_cache_size_tokens:,.0f} tokens"


def saturation_text(s: MetricsSnapshot) -> str:
    """The saturation call-out ("" when not saturated): how many wait for capacity, and how many are only deferred."""
    if not s.saturated or s.kv_cache_usage is None:
        return ""
    if s.waiting_capacity is None:
        return f"SATURATED: {s.waiting:.0f} waiting while the KV pool is {s.kv_cache_usage:.0%} full"
    deferred = f"; {s.waiting_deferred:.0f} more deferred (not for room)" if s.waiting_deferred else ""
    return f"SATURATED: {s.waiting_capacity:.0f} waiting for capacity while the KV pool is {s.kv_cache_usage:.0%} full{deferred}"


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One leaf GPU (a physical GPU with MIG off, or one MIG device) at one sample."""

    index: str
    """"0", or "0/1" for MIG device 1 of GPU 0."""
    name: str
    uuid: str | None = None
    is_mig: bool = False
    mem_bw_util: float | None = None
    """0–1: GPM's DRAM bandwidth share of peak, or, when `mem_bw_source` is "utilization", memory-busy time."""
    mem_bw_gbs: float | None = None
    """GB/s moved; only from GPM, never from busy time."""
    mem_bw_source: str | None = None
    """"gpm", "utilization" (a duty cycle, not bandwidth), or None."""
    peak_bw_gbs: float | None = None
    peak_bw_source: str | None = None
    """"preset" (published figure) or "clock" (max memory clock × bus width × 2 / 8)."""
    sm_util: float | None = None
    """0–1: GPM SM activity, or NVML's kernel-busy time when GPM is missing (`sm_util_source`)."""
    sm_util_source: str | None = None
    tensor_util: float | None = None
    """0–1: GPM's share of time any tensor core was busy; None without GPM (NVML has no other such counter)."""
    gpm_status: str | None = None
    """"ok" (GPM gave this reading's figures), "unsupported" (this GPU or driver has no GPM), "no_permission" (NVML
    refused this user), "failed" (another NVML error: `reason` says which); None before GPM was tried."""
    peak_bw_clock_gbs: float | None = None
    """NVML's own peak: max memory clock × bus width × 2 / 8, GB/s, shown beside a preset's published figure."""
    mem_clock_mhz: float | None = None
    """Current memory clock; below the maximum means throttling or idle."""
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    server_mem_bytes: int | None = None
    """GPU memory held by the server process and its children (found by its listening port)."""
    reason: str | None = None
    """Why some figures are missing: NVML errors, one line."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def serving_devices(devices: Sequence[GpuReading]) -> list[GpuReading]:
    """The devices the server's process holds memory on; the first one where that is not known (a server
    elsewhere, or NVML not naming processes). Empty for no devices."""
    return [d for d in devices if d.server_mem_bytes] or list(devices[:1])


def measured_dram_gbs(serving: Sequence[GpuReading]) -> float | None:
    """GPM's DRAM GB/s summed over `serving`; None where one of them has no GPM reading (busy time is not GB/s)."""
    known = [d.mem_bw_gbs for d in serving if d.mem_bw_source == "gpm" and d.mem_bw_gbs is not None]
    return sum(known) if serving and len(known) == len(serving) else None


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """The local server process (found by its listening port) and its children."""

    pid: int
    name: str
    cpu_percent: float
    """Percent of one core, summed over the process and its children (400 = four busy cores)."""
    rss_bytes: int
    num_threads: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class HostSample:
    """The host's CPU and RAM, and the server process where it runs here."""

    cpu_percent: float
    """Whole-machine CPU busy, 0–100."""
    cpu_count: int
    ram_used_bytes: int
    ram_total_bytes: int
    ram_available_bytes: int
    process: ProcessSample | None = None
    process_reason: str | None = None
    """Why `process` is None: no port given, nothing listening, not ours to read."""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["process"] = self.process.to_json() if self.process else None
        return out


@dataclass(frozen=True, slots=True)
class GpuSample:
    """Every leaf GPU at one moment; `reason` says why the list is empty or short."""

    t_unix: float
    devices: tuple[GpuReading, ...] = ()
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"t_unix": self.t_unix, "devices": [d.to_json() for d in self.devices], "reason": self.reason}
