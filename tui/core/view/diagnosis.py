"""The domain text's "what to change" rules, applied to live numbers.

Each rule names what it saw and the flag or action to try, in the words of the engine that serves:
vLLM, SGLang, llama.cpp and Ollama turn the same knobs under different names, and an engine phasetop
cannot name gets the advice without a flag. Rules read a `LiveFigures`, so the UI and the CLI
diagnose the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.core.engines.engine import Knobs
from tui.core.engines.known import ENGINES
from tui.core.telemetry.readings import SATURATED_KV_USAGE

TTFT_HIGH_S = 0.5
"""A TTFT above this (or far above the prefill floor) counts as high."""
LONG_PROMPT_TOKENS = 1000
LONG_CONTEXT_TOKENS = 4000
FAR_BELOW_CEILING = 0.6
NEAR_CEILING = 0.8


@dataclass(frozen=True, slots=True)
class LiveFigures:
    """What is known right now; None where it is not known (no GPU, no metrics, no request yet)."""

    ttft_s: float | None = None
    prompt_tokens: int | None = None
    context_tokens: int | None = None
    decode_tok_s: float | None = None
    decode_ceiling_tok_s: float | None = None
    prefill_floor_s: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None
    prefix_cache_hit_rate: float | None = None
    prefix_caching_on: bool | None = None
    """The server says its prefix cache is on (vLLM's cache_config_info); None when it does not say."""
    kv_bytes_per_token: float | None = None
    engine: str | None = None
    """Who serves: "vllm", "sglang", "llamacpp", "ollama" (the /metrics engine, else the API kind;
    the kind "openai" reads as vLLM); anything else gets advice without flags."""
    on_cpu: bool = False
    """The server runs on the CPU (its ceiling is the CPU row): far below that bandwidth ceiling it is
    short of threads, not held back by its scheduler."""
    stalled_s: float | None = None
    """The stream's worst gap, where another request's prefill in the same step held it (`tui.core.measure.gaps`)."""
    stalled_by: str | None = None
    """That gap's cause in words: "the prefill of long 2000 (2,000 tokens) in the same step"."""


KNOBS = {engine.name: engine.knobs for engine in ENGINES if engine.knobs is not None}
"""Each engine's words for the knobs (its adapter's, `tui.core.engines`)."""
GENERIC = Knobs(
    kv_room="give the KV cache more memory, lower the maximum context length",
    more_slots="allow more concurrent requests",
    prefix_cache="turn on the server's prefix caching",
    prefill_batch="the prefill batch (chunk) size",
    offload_check=None,
    threads=None,
    weights=None,
    kv_dtype=None,
)
"""An engine phasetop cannot name: the same advice, no flags."""
ENGINE_ALIASES = {"openai": "vllm"}
"""An OpenAI-compatible server whose /metrics named no engine: vLLM, SPEC's reference server."""


def knobs_for(engine: str | None) -> Knobs:
    return KNOBS.get(ENGINE_ALIASES.get(engine or "", engine or ""), GENERIC)


@dataclass(frozen=True, slots=True)
class Finding:
    """One diagnosis: what was seen, and what to try."""

    phase: str
    """"prefill" or "decode"."""
    seen: str
    action: str

    def __str__(self) -> str:
        return f"{self.seen} → {self.action}"


def ttft_is_high(f: LiveFigures) -> bool:
    if f.ttft_s is None:
        return False
    if f.ttft_s > TTFT_HIGH_S:
        return True
    return f.prefill_floor_s is not None and f.ttft_s > 10 * f.prefill_floor_s and f.ttft_s > 0.1


def saturated(f: LiveFigures) -> bool:
    """The saturation signature: requests waiting while the KV pool is (nearly) full."""
    return bool(f.waiting and f.waiting > 0 and f.kv_cache_usage is not None and f.kv_cache_usage >= SATURATED_KV_USAGE)


def diagnose(f: LiveFigures) -> list[Finding]:
    """Every rule that fires, most pressing first, with the knobs of `f.engine`."""
    k = knobs_for(f.engine)
    findings: list[Finding] = []
    if ttft_is_high(f):
        if saturated(f):
            findings.append(Finding(
                "prefill",
                f"TTFT {f.ttft_s:.2f} s with {f.waiting:.0f} waiting and the KV pool {f.kv_cache_usage:.0%} full",
                f"capacity: {k.kv_room}, or add a replica",
            ))
        elif f.waiting and f.waiting > 0:
            findings.append(Finding(
                "prefill",
                f"TTFT {f.ttft_s:.2f} s with {f.waiting:.0f} requests waiting",
                f"capacity: the queue, not the model — {k.more_slots} if the KV pool has room, "
                "lower the load, or add a replica",
            ))
        elif f.prompt_tokens and f.prompt_tokens >= LONG_PROMPT_TOKENS and not f.prefix_cache_hit_rate:
            findings.append(Finding(
                "prefill",
                f"TTFT {f.ttft_s:.2f} s on a {f.prompt_tokens:,}-token prompt with no prefix-cache hits",
                f"shorten the prompt or "
                f"{'keep its start identical across requests (prefix caching is on)' if f.prefix_caching_on else k.prefix_cache}"
                f"; raising {k.prefill_batch} fits more prefill per step",
            ))
        else:
            findings.append(Finding(
                "prefill",
                f"TTFT {f.ttft_s:.2f} s",
                f"raise {k.prefill_batch} so more prefill lands in each step",
            ))
    if f.stalled_s is not None and f.stalled_by:
        findings.append(Finding(
            "decode",
            f"stalled {f.stalled_s * 1e3:,.0f} ms by {f.stalled_by}",
            f"another request's step, not this stream's bandwidth: lower {k.prefill_batch} so a long prefill is "
            "cut into chunks that share steps with decode, or serve prefill apart (disaggregation)",
        ))
    if f.decode_tok_s and f.decode_ceiling_tok_s:
        share = f.decode_tok_s / f.decode_ceiling_tok_s
        if share < FAR_BELOW_CEILING and f.stalled_s is None:  # a stall named above explains the rate
            findings.append(Finding(
                "decode",
                f"{f.decode_tok_s:.0f} tok/s is {share:.0%} of the {f.decode_ceiling_tok_s:.0f} tok/s ceiling",
                _far_below_action(k, f.on_cpu),
            ))
        elif share >= NEAR_CEILING:
            findings.append(Finding(
                "decode",
                f"{f.decode_tok_s:.0f} tok/s is {share:.0%} of the bandwidth ceiling",
                f"bandwidth-bound: quantize the weights{_aside(k.weights)} or move to more memory bandwidth",
            ))
    if f.context_tokens and f.context_tokens >= LONG_CONTEXT_TOKENS:
        kv = f" ({f.context_tokens * f.kv_bytes_per_token / 1e9:.2f} GB of KV read per token)" if f.kv_bytes_per_token else ""
        findings.append(Finding(
            "decode",
            f"context {f.context_tokens:,} tokens{kv}",
            f"long context costs every decode step: trim the conversation or quantize the KV cache{_aside(k.kv_dtype)}",
        ))
    return findings


def _far_below_action(k: Knobs, on_cpu: bool) -> str:
    """Far below the bandwidth ceiling: on a CPU the cores cannot keep the memory busy (too few
    threads: compute-bound); on a GPU the bandwidth is there and the stack leaves it idle."""
    if on_cpu:
        return ("compute, not bandwidth: a CPU this far below its bandwidth ceiling is short of threads — "
                f"give the server more, up to the physical cores{_aside(k.threads)}")
    check = f"{k.offload_check}, " if k.offload_check else ""
    return (f"the serving stack, not the hardware: {check}lower {k.prefill_batch} so prefills interrupt "
            "decode less, check batching and load")


def _aside(flag: str | None) -> str:
    return f" ({flag})" if flag else ""
