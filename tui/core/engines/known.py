"""The engines phasetop knows, and what is read across them: a field's names over every engine, an engine by its
name, its command or a metric's name."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tui.core.engines.engine import Engine
from tui.core.engines.llamacpp import LLAMACPP
from tui.core.engines.ollama import OLLAMA
from tui.core.engines.sglang import SGLANG
from tui.core.engines.tgi import TGI
from tui.core.engines.vllm import VLLM

PHASETOP = Engine(name="phasetop", title="phasetop's simulator", command_marks=("phasetop", " tui sim", "-m tui"),
                  default_port=8000)
"""phasetop's own simulator run as a server: it serves vLLM's API and metric names, so it is read as vLLM."""

ENGINES = (VLLM, SGLANG, LLAMACPP, TGI, OLLAMA)
"""In the order a field's names are tried on a page that holds several engines' (vLLM's first)."""
METRIC_ENGINES = tuple(engine for engine in ENGINES if engine.metric_prefix)
"""Those with Prometheus /metrics."""
COMMAND_ORDER = (PHASETOP, SGLANG, LLAMACPP, VLLM)
"""The engines a command is recognised as, most specific marks first (phasetop's simulator command may run vLLM's
words, SGLang's module path may name vLLM's kernels)."""


def named(name: str | None) -> Engine | None:
    return next((engine for engine in (*ENGINES, PHASETOP) if engine.name == name), None)


def of_command(words: str) -> Engine | None:
    """The engine a command runs, from its first words (lower case): None when none is recognised."""
    return next((engine for engine in COMMAND_ORDER if any(mark in words for mark in engine.command_marks)), None)


def of_metric(raw_names: Iterable[str]) -> Engine | None:
    """The engine whose metric prefix the first of `raw_names` that has one starts with."""
    for raw in raw_names:
        for engine in METRIC_ENGINES:
            if engine.metric_prefix and raw.startswith(engine.metric_prefix):
                return engine
    return None


def engine_name_of(raw_names: Iterable[str]) -> str | None:
    """The name of `of_metric`'s engine, None when no name has a known prefix."""
    engine = of_metric(raw_names)
    return engine.name if engine else None


def titles(engines: Iterable[Engine] = METRIC_ENGINES, *, joined: str = "or") -> str:
    """"vLLM, SGLang, llama.cpp or TGI"."""
    words = [engine.title for engine in engines]
    return f"{', '.join(words[:-1])} {joined} {words[-1]}" if len(words) > 1 else "".join(words)


def metrics_hint() -> str:
    """How each engine's /metrics are had, for a server that answered without them."""
    none = [engine.title for engine in ENGINES if engine.metrics_on is None]
    ways = ", ".join(f"{engine.title} {engine.metrics_on}" for engine in METRIC_ENGINES if engine.metrics_on)
    return f"{' and '.join(none)} {'has' if len(none) == 1 else 'have'} none; start {ways}"


def merged(part: str) -> dict[str, tuple[str, ...]]:
    """Field → every engine's raw names for it (`part`: "gauges", "counters", "histograms"), in `ENGINES` order."""
    out: dict[str, tuple[str, ...]] = {}
    for engine in METRIC_ENGINES:
        table: Mapping[str, tuple[str, ...]] = getattr(engine, part)
        for field_name, names in table.items():
            out[field_name] = out.get(field_name, ()) + names
    return out
