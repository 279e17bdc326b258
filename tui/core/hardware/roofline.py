"""The roofline: decode is bound by bytes read per token, prefill by FLOPs per prompt token."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tui.core.hardware.devices import Device
from tui.core.hardware.models import ModelLayout

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


def forward_flops(params: float, layout: ModelLayout, new_tokens: int, context_before: float = 0) -> float:
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


# ---- the roofline chart: the device's two roofs, and where each phase sits under them ------------------------

PREFILL, DECODE = "prefill", "decode"
MODEL, SERVER_ESTIMATE, NVML, PROJECTED = "model", "server_estimate", "nvml", "projected"
"""Where a point's figures come from: phasetop's model math over measured token rates, the server's own
FLOP and byte counters (vLLM's `--enable-mfu-metrics`), NVML's measured DRAM bandwidth, or a projection of a
measured point to another bit width (nothing measured it)."""


@dataclass(frozen=True, slots=True)
class Roofs:
    """A device's roofline: the flat compute roof and the sloped bandwidth roof; they meet at the ridge."""

    device: str
    peak_flops: float
    peak_bytes_per_s: float

    @property
    def ridge_flop_per_byte(self) -> float:
        """The intensity where the two roofs meet: below it a step waits on memory, above it on compute."""
        return self.peak_flops / self.peak_bytes_per_s

    def roof_flops(self, intensity: float) -> float:
        """The most FLOP/s a kernel of this intensity can reach: min(peak compute, intensity × peak bandwidth)."""
        return min(self.peak_flops, intensity * self.peak_bytes_per_s)

    def bound(self, intensity: float) -> str:
        """"compute" at or past the ridge, else "bandwidth"."""
        return "compute" if intensity >= self.ridge_flop_per_byte else "bandwidth"

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "peak_flops": self.peak_flops, "peak_bytes_per_s": self.peak_bytes_per_s,
                "ridge_flop_per_byte": self.ridge_flop_per_byte}


def device_roofs(device: Device, time_scale: float = 1.0) -> Roofs:
    """The published roofs of a device (dense bf16 peak, memory bandwidth); a simulator slowed `time_scale`
    times has roofs that much lower, as its decode ceiling is."""
    slower = f" ({time_scale:g}× slower)" if time_scale != 1 else ""
    return Roofs(f"{device.name}{slower}", device.peak_bf16_tflops * 1e12 / time_scale,
                 device.mem_bandwidth_gbs * 1e9 / time_scale)


@dataclass(frozen=True, slots=True)
class PhasePoint:
    """One phase on the roofline: its arithmetic intensity, the FLOP/s it reached, and the roof above it."""

    phase: str
    source: str
    intensity_flop_per_byte: float
    achieved_flops: float
    roof_flops: float
    """The roof's height at this intensity: what the device could give a step this shaped."""
    bound: str
    """"compute" or "bandwidth": which roof is above the point."""
    batch: float | None = None
    """Decode: tokens per step (sequences decoding together); None for prefill."""
    tokens: int | None = None
    """Prefill: the prompt tokens computed; None for decode."""
    context: float | None = None
    """Decode from the model's layout: the mean context each sequence attended to; None otherwise."""
    verified: int = 1
    """Decode: tokens each sequence computes a step (K + 1 where the server speculates: the drafts verified too)."""

    @property
    def roof_share(self) -> float:
        """Achieved over the roof above: MFU under the compute roof, bandwidth utilisation under the other."""
        return self.achieved_flops / self.roof_flops

    @property
    def reading(self) -> str:
        """One line for a person: where the point sits and what moves it."""
        share = f"{self.roof_share * 100:.0f} % of the {self.bound} roof"
        if self.phase not in (PREFILL, DECODE):
            return f"{self.phase}: {share}"
        if self.phase == DECODE:
            verifying = f", verifying {self.verified} tokens a sequence (speculation)" if self.verified > 1 else ""
            where = f"decode at batch {self.batch:.3g}{verifying}: {share}"
            if self.bound == "bandwidth":
                return f"{where}; raise the batch to move right"
            return f"{where}; past the ridge a bigger batch adds little throughput"
        where = f"prefill of {self.tokens:,} tokens: {share}"
        if self.bound == "compute":
            return f"{where} (MFU); a longer prompt stays at this roof and costs more time"
        return f"{where}; too short a prompt to be compute bound"

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "intensity_flop_per_byte": self.intensity_flop_per_byte,
                "achieved_flops": self.achieved_flops, "roof_flops": self.roof_flops, "roof_share": self.roof_share,
                "bound": self.bound, "batch": self.batch, "tokens": self.tokens, "verified": self.verified,
                "reading": self.reading}


def _point(roofs: Roofs, phase: str, source: str, flops: float, read_bytes: float, seconds: float,
           batch: float | None = None, tokens: int | None = None, context: float | None = None) -> PhasePoint:
    intensity = flops / read_bytes
    return PhasePoint(phase, source, intensity, flops / seconds, roofs.roof_flops(intensity), roofs.bound(intensity),
                      batch, tokens, context)


def prefill_traffic(layout: ModelLayout, params: float, weights: float, new_tokens: int, context_before: int = 0,
                    chunk_tokens: int | None = None, kv_bytes_per_element: float = 2) -> tuple[float, float]:
    """(FLOPs, bytes read) of a prompt's prefill: `new_tokens` after `context_before` cached ones.

    Each pass (a chunk of `chunk_tokens`; None: the whole prompt in one) reads every weight once and the KV
    cache of the tokens before it. The FLOPs do not depend on the chunking: the chunks' attention adds up
    to the whole prompt's triangle.
    """
    chunk = chunk_tokens or new_tokens
    kv_token = kv_bytes_per_token(layout, kv_bytes_per_element)
    read, done = 0.0, 0
    while done < new_tokens:
        read += weights + kv_token * (context_before + done)
        done += min(chunk, new_tokens - done)
    return forward_flops(params, layout, new_tokens, context_before), read


def prefill_point(roofs: Roofs, layout: ModelLayout, params: float, weights: float, prompt_tokens: int,
                  prefill_s: float, cached_tokens: int = 0, chunk_tokens: int | None = None) -> PhasePoint:
    """Prefill from the model's layout: the prompt's FLOPs over the bytes its passes read, done in `prefill_s`."""
    new_tokens = prompt_tokens - cached_tokens
    flops, read = prefill_traffic(layout, params, weights, new_tokens, cached_tokens, chunk_tokens)
    return _point(roofs, PREFILL, MODEL, flops, read, prefill_s, tokens=new_tokens)


def decode_step_traffic(layout: ModelLayout, params: float, weights: float, batch: float, context: float,
                        kv_bytes_per_element: float = 2, verified: int = 1) -> tuple[float, float]:
    """(FLOPs, bytes read) of one decode step: `batch` sequences each compute `verified` tokens after `context`
    tokens (1; K + 1 where a server speculates: the token and the K drafts it verifies in the same pass).

    One read of the weights serves the whole batch; each sequence reads its own KV cache once for all it verifies.
    """
    kv_read = batch * kv_bytes_per_token(layout, kv_bytes_per_element) * context
    return batch * forward_flops(params, layout, verified, context), weights + kv_read


def decode_point(roofs: Roofs, layout: ModelLayout, params: float, weights: float, batch: float, context: float,
                 decode_tok_s: float, verified: int = 1, tokens_a_step: float = 1.0) -> PhasePoint:
    """Decode from the model's layout: intensity ≈ batch × verified × 2 × params / (weights + batch's KV); achieved
    from the tokens per second of all sequences together, a step giving each `tokens_a_step` of them (a speculating
    server's mean accepted length: its step computes `verified` tokens a sequence, rejected drafts included)."""
    flops, read = decode_step_traffic(layout, params, weights, batch, context, verified=verified)
    point = _point(roofs, DECODE, MODEL, flops, read, batch * tokens_a_step / decode_tok_s, batch=batch, context=context)
    return replace(point, verified=verified) if verified != 1 else point


def estimated_point(roofs: Roofs, phase: str, flops: float, read_bytes: float, seconds: float,
                    batch: float | None = None, tokens: int | None = None) -> PhasePoint | None:
    """A phase from the server's own counters (FLOPs and bytes it estimates it did in `seconds`); None when
    they counted nothing (vLLM without --enable-mfu-metrics leaves them at 0)."""
    if flops <= 0 or read_bytes <= 0 or seconds <= 0:
        return None
    return _point(roofs, phase, SERVER_ESTIMATE, flops, read_bytes, seconds, batch, tokens)


def measured_point(roofs: Roofs, model: PhasePoint, measured_bytes_per_s: float) -> PhasePoint | None:
    """The model's FLOP/s over the DRAM bytes per second NVML measured in the same window: the point moves
    left (more bytes than the model counts) or right (fewer: caches) of the model's."""
    if measured_bytes_per_s <= 0:
        return None
    intensity = model.achieved_flops / measured_bytes_per_s
    return PhasePoint(model.phase, NVML, intensity, model.achieved_flops, roofs.roof_flops(intensity),
                      roofs.bound(intensity), model.batch, model.tokens, model.context)
