"""The domain text's "what to change" rules, applied to live numbers.

Each rule names what it saw and the flag or action to try. Rules read a `LiveFigures`, so the UI and
the CLI diagnose the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

TTFT_HIGH_S = 0.5
"""A TTFT above this (or far above the prefill floor) counts as high."""
LONG_PROMPT_TOKENS = 1000
LONG_CONTEXT_TOKENS = 4000
SATURATED_KV_USAGE = 0.95
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
    kv_bytes_per_token: float | None = None


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
    """Every rule that fires, most pressing first."""
    findings: list[Finding] = []
    if ttft_is_high(f):
        if saturated(f):
            findings.append(Finding(
                "prefill",
                f"TTFT {f.ttft_s:.2f} s with {f.waiting:.0f} waiting and the KV pool {f.kv_cache_usage:.0%} full",
                "capacity: raise --gpu-memory-utilization, lower --max-model-len, or add a replica",
            ))
        elif f.waiting and f.waiting > 0:
            findings.append(Finding(
                "prefill",
                f"TTFT {f.ttft_s:.2f} s with {f.waiting:.0f} requests waiting",
                "capacity: the queue, not the model — lower the load or add a replica",
            ))
        elif f.prompt_tokens and f.prompt_tokens >= LONG_PROMPT_TOKENS and not f.prefix_cache_hit_rate:
            findings.append(Finding(
                "prefill",
                f"TTFT {f.ttft_s:.2f} s on a {f.prompt_tokens:,}-token prompt with no prefix-cache hits",
                "shorten the prompt or enable prefix caching (--enable-prefix-caching); "
                "a larger --max-num-batched-tokens fits more prefill per step",
            ))
        else:
            findings.append(Finding(
                "prefill",
                f"TTFT {f.ttft_s:.2f} s",
                "raise --max-num-batched-tokens so more prefill lands in each step",
            ))
    if f.decode_tok_s and f.decode_ceiling_tok_s:
        share = f.decode_tok_s / f.decode_ceiling_tok_s
        if share < FAR_BELOW_CEILING:
            findings.append(Finding(
                "decode",
                f"decode {f.decode_tok_s:.0f} tok/s is {share:.0%} of the {f.decode_ceiling_tok_s:.0f} tok/s ceiling",
                "the serving stack, not the hardware: lower --max-num-batched-tokens so prefills interrupt "
                "decode less, check batching and load",
            ))
        elif share >= NEAR_CEILING:
            findings.append(Finding(
                "decode",
                f"decode {f.decode_tok_s:.0f} tok/s is {share:.0%} of the bandwidth ceiling",
                "bandwidth-bound: quantize the weights (--quantization fp8) or move to more memory bandwidth",
            ))
    if f.context_tokens and f.context_tokens >= LONG_CONTEXT_TOKENS:
        kv = f" ({f.context_tokens * f.kv_bytes_per_token / 1e9:.2f} GB of KV read per token)" if f.kv_bytes_per_token else ""
        findings.append(Finding(
            "decode",
            f"context {f.context_tokens:,} tokens{kv}",
            "long context costs every decode step: trim the conversation or quantize the KV cache (--kv-cache-dtype fp8)",
        ))
    return findings
