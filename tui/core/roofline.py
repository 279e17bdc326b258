"""The roofline: decode is bound by bytes read per token, prefill by FLOPs per prompt token."""

from __future__ import annotations

from dataclasses import dataclass

from tui.core.models import ModelLayout

GB = 1e9


def weight_bytes(params: float, bits: int) -> float:
    """Bytes the weights occupy at a bit width (16, 8 or 4)."""
    return params * bits / 8


def kv_bytes_per_token(layout: ModelLayout, bytes_per_element: float = 2) -> float:
    """2 (key and value) × layers × KV heads × head dim × bytes per element."""
    return 2 * layout.layers * layout.kv_heads * layout.head_dim * bytes_per_element


def bytes_per_decode_token(weights: float, kv_per_token: float, context: int) -> float:
    """Bytes one decode step reads for one sequence: every weight, plus the KV cache of its context."""
    return weights + kv_per_token * context


def decode_ceiling_tok_s(bandwidth_gbs: float, bytes_per_token: float) -> float:
    """The single-stream ceiling: bandwidth divided by bytes read per token."""
    return bandwidth_gbs * GB / bytes_per_token


def forward_flops(params: float, layout: ModelLayout, new_tokens: int, context_before: int = 0) -> float:
    """FLOPs to push `new_tokens` through the model after `context_before` tokens already cached.

    2 × params per token for the matrix work, plus attention's 4 × layers × hidden × new tokens ×
    the context each new token sees (on average, the cached context plus half the new tokens).
    """
    mean_context = context_before + new_tokens / 2
    return 2 * params * new_tokens + 4 * layout.layers * layout.hidden * new_tokens * mean_context


def prefill_floor_s(params: float, layout: ModelLayout, prompt_tokens: int, peak_tflops: float) -> float:
    """The least time a prompt's prefill can take at the device's peak compute."""
    return forward_flops(params, layout, prompt_tokens) / (peak_tflops * 1e12)


@dataclass(frozen=True, slots=True)
class Ceiling:
    """One row of the ceiling table, unrounded."""

    device: str
    mem_bandwidth_gbs: float
    peak_bf16_tflops: float | None
    model: str
    params: float
    bits: int
    context: int
    weight_bytes: float
    kv_bytes_per_token: float
    kv_bytes_at_context: float
    bytes_per_token: float
    decode_ceiling_tok_s: float
    prefill_floor_s: float | None
    prefill_tokens: int
    prefill_ceiling_tok_s: float | None


def ceiling(
    *,
    device: str,
    bandwidth_gbs: float,
    peak_tflops: float | None,
    layout: ModelLayout,
    params: float | None = None,
    bits: int = 16,
    context: int = 0,
    prefill_tokens: int = 2000,
    kv_bytes_per_element: float = 2,
) -> Ceiling:
    """Decode ceiling and prefill floor for a device, a model at a bit width, and a context length."""
    params = layout.params if params is None else params
    weights = weight_bytes(params, bits)
    kv_token = kv_bytes_per_token(layout, kv_bytes_per_element)
    per_token = bytes_per_decode_token(weights, kv_token, context)
    floor = prefill_floor_s(params, layout, prefill_tokens, peak_tflops) if peak_tflops else None
    return Ceiling(
        device=device,
        mem_bandwidth_gbs=bandwidth_gbs,
        peak_bf16_tflops=peak_tflops,
        model=layout.name,
        params=params,
        bits=bits,
        context=context,
        weight_bytes=weights,
        kv_bytes_per_token=kv_token,
        kv_bytes_at_context=kv_token * context,
        bytes_per_token=per_token,
        decode_ceiling_tok_s=decode_ceiling_tok_s(bandwidth_gbs, per_token),
        prefill_floor_s=floor,
        prefill_tokens=prefill_tokens,
        prefill_ceiling_tok_s=prefill_tokens / floor if floor else None,
    )


def served_ceiling(device: str, bandwidth_gbs: float, model_bytes: float) -> tuple[float, str]:
    """The decode ceiling of a served model whose real size is known (a GGUF's mixed quantization), and one line saying so.

    Only the weights are counted: the KV cache of a short context adds little to a step's bytes.
    """
    tok_s = decode_ceiling_tok_s(bandwidth_gbs, model_bytes)
    return tok_s, f"decode ceiling {tok_s:,.0f} tok/s: {bandwidth_gbs:,.0f} GB/s ÷ {model_bytes / 1e6:,.0f} MB weights\n  ({device})"
