"""Canonical fields ← raw /metrics names, per engine and version, and the reading of one scrape.

Each field lists its raw names in order of preference; the first one present in a scrape feeds
the field, and `source_names` records which. The names are the engines' adapters' (`tui.core.engines`, from
`wire-formats.md`). Values are summed over label sets (vLLM's `engine`,
SGLang's `dp_rank`, `is_streaming`), except that fractions are averaged.
"""

from __future__ import annotations

from collections import defaultdict

from prometheus_client.parser import text_string_to_metric_families

from tui.core.engines.known import METRIC_ENGINES, engine_name_of, merged
from tui.core.engines.llamacpp import PROMPT_TOKENS_CACHED
from tui.core.engines.vllm import ACCEPTED_PER_POSITION
from tui.core.telemetry.readings import Histogram, ServerReading
from tui.core.telemetry.speculation import position_counter

GAUGES = merged("gauges")
COUNTERS = merged("counters")
HISTOGRAMS = merged("histograms")
"""Field → raw names over every engine (`tui.core.engines`: one adapter each), in order of preference."""

FRACTION_GAUGES = frozenset({"kv_cache_usage", "prefix_cache_hit_rate"})
"""Per-engine fractions: averaged over label sets, never summed."""

PER_GPU_COUNTERS = frozenset({"est_read_bytes_total", "est_flops_total"})
"""Counters already per GPU: averaged over engines (each engine drives its own GPUs), never summed."""

LABELLED_GAUGES = {name: raw for engine in METRIC_ENGINES for name, raw in engine.labelled_gauges.items()}
LABELLED_COUNTERS = {name: raw for engine in METRIC_ENGINES for name, raw in engine.labelled_counters.items()}
"""Fields fed by one label value of a family: field → (raw name, label, value)."""

CONFIG_INFO = tuple(raw for engine in METRIC_ENGINES for raw in engine.config_info)
"""Info metrics whose labels are the engine's configuration (value 1)."""
CONFIG_GAUGES = {raw: key for engine in METRIC_ENGINES for raw, key in engine.config_gauges.items()}
"""Gauges that are really configuration, shown in `engine_config`."""

PROCESS_START = "process_start_time_seconds"

_SUMMED_AWAY = frozenset({"engine"})
"""Labels dropped from config info: one engine's config stands for all."""

_REPLICA_LABELS = tuple(label for engine in METRIC_ENGINES for label in engine.replica_labels)
"""Labels by which an engine repeats a gauge per rank: keep rank 0 only."""

Samples = dict[str, list[tuple[dict[str, str], float]]]


def _wanted_samples() -> frozenset[str]:
    """Every sample name `read_scrape` reads: the rest of a page (vLLM's is ~420 lines, ~160 of them read) is not
    parsed at all, so an idle server's scrape costs a third."""
    names = {name for table in (GAUGES, COUNTERS) for candidates in table.values() for name in candidates}
    names |= {raw for raw, _, _ in (*LABELLED_GAUGES.values(), *LABELLED_COUNTERS.values())}
    names |= {*CONFIG_INFO, *CONFIG_GAUGES, PROCESS_START, ACCEPTED_PER_POSITION}
    names |= {f"{raw}{suffix}" for candidates in HISTOGRAMS.values() for raw in candidates
              for suffix in ("_bucket", "_count", "_sum")}
    return frozenset(names | {f"{name}_total" for name in names} | {name.removesuffix("_total") for name in names})


WANTED_SAMPLES = _wanted_samples()


def wanted_lines(text: str) -> str:
    """The page's sample lines `read_scrape` reads (no comments: a sample's name is all it is read by). A page with
    no such line is returned whole, so text that is not Prometheus at all still fails to parse."""
    kept = [line for line in text.split("\n")  # the format's line end only: a label may hold \x0b, \x1c, \u2028…
            if line and line[0] != "#" and line.partition("{")[0].partition(" ")[0] in WANTED_SAMPLES]
    return "\n".join(kept) + "\n" if kept else text


def parse_exposition(text: str) -> Samples:
    """Raw samples by name from Prometheus text; `_created` samples dropped. Raises ValueError on bad text."""
    samples: Samples = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            samples[_base(sample.name)].append((dict(sample.labels), float(sample.value)))
    return dict(samples)


def _base(name: str) -> str:
    """Counters appear with and without `_total` (prometheus_client adds it): key both the same way."""
    return name.removesuffix("_total")


def _find(samples: Samples, candidates: tuple[str, ...]) -> tuple[str, list[tuple[dict[str, str], float]]] | None:
    for raw in candidates:
        found = samples.get(_base(raw))
        if found:
            return raw, found
    return None


def _primary(rows: list[tuple[dict[str, str], float]]) -> list[tuple[dict[str, str], float]]:
    return [(labels, v) for labels, v in rows if all(labels.get(r, "0") == "0" for r in _REPLICA_LABELS)]


def read_scrape(text: str, t_mono: float, t_unix: float, extra_config: dict[str, str] | None = None) -> ServerReading:
    """One /metrics body in canonical names. Raises ValueError when the text is not Prometheus format."""
    return read_wanted(wanted_lines(text), t_mono, t_unix, extra_config)


def read_wanted(text: str, t_mono: float, t_unix: float, extra_config: dict[str, str] | None = None) -> ServerReading:
    """`read_scrape` of a page already cut to its `wanted_lines`."""
    samples = parse_exposition(text)
    source_names: dict[str, str] = {}
    gauges: dict[str, float] = {}
    for field_name, candidates in GAUGES.items():
        found = _find(samples, candidates)
        if found:
            raw, rows = found
            values = [v for _, v in _primary(rows)] or [v for _, v in rows]
            gauges[field_name] = sum(values) / len(values) if field_name in FRACTION_GAUGES else sum(values)
            source_names[field_name] = raw
    counters: dict[str, float] = {}
    for field_name, candidates in COUNTERS.items():
        found = _find(samples, candidates)
        if found:
            values = [v for _, v in found[1]]
            counters[field_name] = sum(values) / len(values) if field_name in PER_GPU_COUNTERS else sum(values)
            source_names[field_name] = found[0]
    for table, out in ((LABELLED_GAUGES, gauges), (LABELLED_COUNTERS, counters)):
        for field_name, (raw, label, value) in table.items():
            matched = [v for labels, v in samples.get(_base(raw), []) if labels.get(label) == value]
            if matched:
                out[field_name] = sum(matched)
                source_names[field_name] = f'{raw}{{{label}="{value}"}}'
    for labels, accepted in samples.get(_base(ACCEPTED_PER_POSITION), []):
        if (position := labels.get("position", "")).isdigit():
            name = position_counter(position)
            counters[name] = counters.get(name, 0.0) + accepted
            source_names[name] = f'{ACCEPTED_PER_POSITION}{{position="{position}"}}'
    if (size := _kv_cache_size_tokens(samples)) is not None:
        gauges["kv_cache_size_tokens"] = size
        source_names["kv_cache_size_tokens"] = "vllm:cache_config_info{kv_cache_size_tokens}"
    _derive_llamacpp_queries(counters, source_names)
    histograms: dict[str, Histogram] = {}
    for field_name, candidates in HISTOGRAMS.items():
        for raw in candidates:
            histogram = _histogram(samples, raw)
            if histogram is not None:
                histograms[field_name] = histogram
                source_names[field_name] = raw
                break
    process_start = samples.get(PROCESS_START)
    return ServerReading(
        t_mono=t_mono,
        t_unix=t_unix,
        engine=engine_name_of(source_names.values()),
        gauges=gauges,
        counters=counters,
        histograms=histograms,
        source_names=source_names,
        engine_config={**_engine_config(samples), **(extra_config or {})},
        process_start_s=min(v for _, v in process_start) if process_start else None,
    )


def _derive_llamacpp_queries(counters: dict[str, float], source_names: dict[str, str]) -> None:
    """llama.cpp counts prompt tokens computed and prompt tokens taken from its cache apart: their sum is the queries."""
    if source_names.get("prefix_cache_hits_total") != PROMPT_TOKENS_CACHED or "prompt_tokens_total" not in counters:
        return
    counters["prefix_cache_queries_total"] = counters["prompt_tokens_total"] + counters["prefix_cache_hits_total"]
    source_names["prefix_cache_queries_total"] = f"{source_names['prompt_tokens_total']} + {PROMPT_TOKENS_CACHED}"


def _histogram(samples: Samples, raw: str) -> Histogram | None:
    """Buckets summed over label sets, with `le` read from the scrape."""
    rows = samples.get(f"{raw}_bucket")
    if not rows:
        return None
    by_le: dict[float, float] = defaultdict(float)
    for labels, value in rows:
        if "le" in labels:
            by_le[float(labels["le"])] += value
    if not by_le:
        return None
    count = sum(v for _, v in samples.get(f"{raw}_count", [])) or by_le.get(float("inf"), 0.0)
    total = sum(v for _, v in samples.get(f"{raw}_sum", []))
    return Histogram(buckets=tuple(sorted(by_le.items())), count=count, sum=total)


def _engine_config(samples: Samples) -> dict[str, str]:
    config: dict[str, str] = {}
    for raw in CONFIG_INFO:
        for labels, _ in samples.get(raw, [])[:1]:
            config.update({k: v for k, v in labels.items() if k not in _SUMMED_AWAY})
    for raw, key in CONFIG_GAUGES.items():
        rows = samples.get(raw)
        if rows:
            config[key] = f"{rows[0][1]:g}"
    return config


def _kv_cache_size_tokens(samples: Samples) -> float | None:
    """Tokens the KV pool holds, summed over engines (one `cache_config_info` row each, each its own pool)."""
    per_engine: dict[str, float] = {}
    for raw in CONFIG_INFO:
        for labels, _ in samples.get(raw, []):
            try:
                per_engine[labels.get("engine", "0")] = float(labels["kv_cache_size_tokens"])
            except (KeyError, ValueError):  # absent, or "None" before the pool is sized
                continue
    return sum(per_engine.values()) if per_engine else None
