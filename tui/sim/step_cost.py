"""What one engine step costs: the engine's settings (device, model, vLLM's flags) and a step's roofline time.

A step reads every weight once and each sequence's KV cache, writes the new tokens' KV, and computes their FLOPs; it
takes max(memory, compute) + a fixed overhead. Pure, as the physics it times (`tui.sim.physics`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tui.core.hardware.devices import Device
from tui.core.hardware.models import ModelLayout
from tui.core.hardware.roofline import forward_flops, kv_bytes_per_token, weight_bytes
from tui.sim.blocks import BLOCK_SIZE
from tui.sim.speculation import Speculation, draft_passes

MEMORY_EFFICIENCY = 1.0
"""Share of peak bandwidth a step reaches. The domain text's ceiling is the bound, and its claim is a
measured rate within 3 % below it, so the sim streams at the full roofline and loses only the overhead."""
COMPUTE_EFFICIENCY = 0.5
"""Share of peak bf16 FLOPs a step reaches (model FLOPs utilisation): prefill GEMMs on real stacks
reach 40–60 %, so prefill is slower than the compute roofline, as measured servers are."""
STEP_OVERHEAD_S = 40e-6
"""Fixed cost of one engine step (scheduling, kernel launches under CUDA graphs, sampling).
At 16-bit 8B on an H100 this puts one stream at 207.6 tok/s, 0.9 % below the 209.4 ceiling."""


class ConfigError(ValueError):
    """The engine cannot start with these settings (the words say why, as vLLM's would)."""


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Everything the physics needs: the device, the model, and vLLM's scheduler and cache flags."""

    device: Device
    layout: ModelLayout
    bits: int = 16
    kv_bytes_per_element: float = 2
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 256
    gpu_memory_utilization: float = 0.9
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    max_model_len: int | None = None
    """None: the model's own limit."""
    memory_efficiency: float = MEMORY_EFFICIENCY
    compute_efficiency: float = COMPUTE_EFFICIENCY
    step_overhead_s: float = STEP_OVERHEAD_S
    speculation: Speculation | None = None
    """Speculative decoding (`tui.sim.speculation`); None: a token a step."""

    @property
    def model_len(self) -> int:
        return self.max_model_len or self.layout.max_model_len

    @property
    def weight_bytes(self) -> float:
        return weight_bytes(self.layout.params, self.bits)

    @property
    def kv_bytes_per_token(self) -> float:
        return kv_bytes_per_token(self.layout, self.kv_bytes_per_element)

    @property
    def kv_pool_bytes(self) -> float:
        return self.gpu_memory_utilization * self.device.memory_gb * 1e9 - self.weight_bytes

    @property
    def num_gpu_blocks(self) -> int:
        """KV blocks that fit in the memory left after the weights (activations are not modelled)."""
        return max(0, math.floor(self.kv_pool_bytes / (self.kv_bytes_per_token * BLOCK_SIZE)))

    def validate(self) -> None:
        """Refuse what vLLM refuses at startup, in one line each."""
        if self.max_num_batched_tokens < 1 or self.max_num_seqs < 1:
            raise ConfigError("max-num-batched-tokens and max-num-seqs must be at least 1")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(f"gpu-memory-utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.model_len < 1:
            raise ConfigError("max-model-len must be at least 1")
        if self.kv_pool_bytes <= 0:
            raise ConfigError(
                f"the weights ({self.weight_bytes / 1e9:.1f} GB) do not fit in {self.gpu_memory_utilization:g} × "
                f"{self.device.memory_gb:g} GB of {self.device.name}; quantize, or raise --gpu-memory-utilization"
            )
        capacity = self.num_gpu_blocks * BLOCK_SIZE
        if capacity < self.model_len:
            raise ConfigError(
                f"the model's max seq len ({self.model_len}) needs {self.model_len * self.kv_bytes_per_token / 2**30:.2f} GiB "
                f"of KV cache, more than the {capacity * self.kv_bytes_per_token / 2**30:.2f} GiB available; "
                f"lower --max-model-len to {capacity} or raise --gpu-memory-utilization"
            )
        if not self.enable_chunked_prefill and self.max_num_batched_tokens < self.model_len:
            raise ConfigError(
                f"max-num-batched-tokens ({self.max_num_batched_tokens}) is smaller than max-model-len "
                f"({self.model_len}) with chunked prefill off: raise it or lower --max-model-len"
            )


@dataclass(frozen=True, slots=True)
class StepTraffic:
    """What one step moves and computes: the figures vLLM's `--enable-mfu-metrics` estimates."""

    read_bytes: float
    write_bytes: float
    flops: float


def step_traffic(config: EngineConfig, work: list[tuple[int, int]]) -> StepTraffic:
    """Bytes and FLOPs of one step for `(new_tokens, context_before)` per sequence.

    Reads: every weight once, plus each sequence's KV cache so far. Writes: the KV of the new tokens.
    Compute: 2 × params per token plus attention over each token's context (`forward_flops`).
    """
    context_tokens = sum(context for _, context in work)
    new_tokens = sum(new for new, _ in work)
    return StepTraffic(
        read_bytes=config.weight_bytes + config.kv_bytes_per_token * context_tokens,
        write_bytes=config.kv_bytes_per_token * new_tokens,
        flops=sum(forward_flops(config.layout.params, config.layout, new, context) for new, context in work),
    )


def step_time_s(config: EngineConfig, work: list[tuple[int, int]], drafting: int = 0) -> float:
    """One step's time for `(new_tokens, context_before)` per sequence: max(memory, compute) + overhead; and where a
    draft model speculates, its K passes over the `drafting` sequences before it."""
    traffic = step_traffic(config, work)
    step_s = _roofline_s(config, traffic.read_bytes + traffic.write_bytes, traffic.flops) + config.step_overhead_s
    if drafting and config.speculation is not None:
        passes, moved, flops = draft_passes(config.speculation, config.weight_bytes, config.layout.params, drafting)
        step_s += passes * (_roofline_s(config, moved, flops) + config.step_overhead_s)
    return step_s


def _roofline_s(config: EngineConfig, moved_bytes: float, flops: float) -> float:
    memory_s = moved_bytes / (config.device.mem_bandwidth_gbs * 1e9 * config.memory_efficiency)
    compute_s = flops / (config.device.peak_bf16_tflops * 1e12 * config.compute_efficiency)
    return max(memory_s, compute_s)
