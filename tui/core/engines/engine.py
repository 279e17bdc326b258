"""What an engine adapter holds: `Engine`, and `Knobs`, its words for the knobs the diagnosis turns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

Names = Mapping[str, tuple[str, ...]]
"""Canonical field → the engine's raw /metrics names for it, preferred first (a newer name before an older)."""
Labelled = Mapping[str, tuple[str, str, str]]
"""Canonical field → (raw name, label, value): fed by one label value of a family."""


@dataclass(frozen=True, slots=True)
class Knobs:
    """One engine's words for the knobs the rules turn; None where it has no flag to name."""

    kv_room: str
    """Capacity: how to give the KV pool more room."""
    more_slots: str
    """Capacity: how to run more requests at once."""
    prefix_cache: str
    """How to stop recomputing a repeated prefix."""
    prefill_batch: str
    """The knob that sets how much prefill lands in one step (a flag, or a phrase with its article)."""
    offload_check: str | None
    """A check that comes before blaming the scheduler (layers left on the CPU)."""
    threads: str | None
    weights: str | None
    kv_dtype: str | None


@dataclass(frozen=True, slots=True)
class Engine:
    """One serving engine as phasetop reads, advises and runs it."""

    name: str
    """phasetop's word for it: "vllm", "sglang", "llamacpp", "tgi", "ollama", "phasetop"."""
    title: str
    """Its name for a person: "vLLM", "llama.cpp"."""
    metric_prefix: str | None = None
    """What each of its /metrics names starts with ("vllm:"); None: it serves no Prometheus metrics."""
    gauges: Names = field(default_factory=dict)
    counters: Names = field(default_factory=dict)
    histograms: Names = field(default_factory=dict)
    labelled_gauges: Labelled = field(default_factory=dict)
    labelled_counters: Labelled = field(default_factory=dict)
    config_info: tuple[str, ...] = ()
    """Info metrics whose labels are its configuration (value 1)."""
    config_gauges: Mapping[str, str] = field(default_factory=dict)
    """Gauges that are really configuration: raw name → key in `engine_config`."""
    replica_labels: tuple[str, ...] = ()
    """Labels by which it repeats a gauge per rank: rank "0" alone is read."""
    knobs: Knobs | None = None
    """Its words for the diagnosis's knobs; None: the generic advice."""
    command_marks: tuple[str, ...] = ()
    """Words in the first few of its command's words (program or module) that say it runs."""
    default_port: int | None = None
    """Where it listens when its command names no port."""
    metrics_on: str | None = None
    """How its Prometheus /metrics are had, after its title: "with --metrics"; "" always; None: it has none."""
