"""What one simulator instance serves: the engine config plus the server-level flags."""

from __future__ import annotations

from dataclasses import dataclass, field

from tui.sim.step_cost import EngineConfig

VLLM_VERSION = "0.33.0"
"""The vLLM release whose wire format the simulator speaks (see wire-formats.md)."""
OLLAMA_VERSION = "0.33.0"
READY_PREFIX = "phasetop-sim listening on "
"""`phasetop sim` prints this and its URL on stdout once it listens; the launcher waits for the line."""
WORKER_PREFIX = "phasetop-sim worker "
"""`phasetop sim --disaggregated` prints one line per worker before the ready line: this, its name
("prefill-0", "decode-0"), " listening on " and its URL."""

QUANTIZATION_BITS = {"none": 16, "fp8": 8, "int8": 8, "int4": 4}
"""`--quantization` → weight bit width (the KV cache stays 16-bit, as vLLM's default cache dtype)."""

SERVED_NAMES = {
    "Llama-3.1-8B": ("meta-llama/Llama-3.1-8B-Instruct", "llama3.1:8b"),
    "Llama-3.2-1B": ("meta-llama/Llama-3.2-1B-Instruct", "llama3.2:1b"),
    "Llama-3.2-3B": ("meta-llama/Llama-3.2-3B-Instruct", "llama3.2:3b"),
    "Qwen2.5-7B": ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5:7b"),
    "Llama-3.1-70B": ("meta-llama/Llama-3.1-70B-Instruct", "llama3.1:70b"),
    "Gemma-3-270M": ("google/gemma-3-270m-it", "gemma3:270m"),
}
"""Preset layout name → the id vLLM and Ollama would serve it under."""


def served_name(layout_name: str, api: str) -> str:
    """The model id a user would recognise: the Hugging Face repo (vLLM) or the Ollama tag."""
    names = SERVED_NAMES.get(layout_name)
    if names is None:
        return layout_name
    return names[1] if api == "ollama" else names[0]


@dataclass(frozen=True)
class SimOptions:
    """Server-level settings around the engine config."""

    config: EngineConfig
    served_model_name: str
    api: str = "openai"
    api_key: str | None = field(default=None, repr=False)
    """Guards /v1 as vLLM's --api-key does; kept in memory only, never printed."""
    time_scale: float = 1.0
    enable_prompt_tokens_details: bool = False
    """vLLM's flag: usage gets `prompt_tokens_details.cached_tokens` (omitted otherwise)."""
    enable_per_request_metrics: bool = False
    """vLLM's flag: answers carry `metrics` (server-side TTFT, generation time, queue time, …)."""
    enable_mfu_metrics: bool = False
    """vLLM's flag: `vllm:estimated_{flops,read_bytes,write_bytes}_per_gpu_total` count (else stay 0)."""
    eos_probability: float = 0.0
    """Chance per generated token that the model emits EOS (seeded per prompt); 0 keeps every answer to
    max_tokens, as the demo expects. A random-weight model on real vLLM stops like this now and then."""
    role: str | None = None
    """A disaggregated simulator's worker role ("prefill", "decode"), a label on its series; None for one server."""
    engine_label: str = "0"
    """The `engine` label of its series: a worker's index in its pool, so the front's merged series stay apart."""
    disaggregation: tuple[tuple[str, str], ...] = ()
    """A disaggregated simulator's layout (workers, link, split), in `sim_info`; empty for one server."""
    otlp_traces_endpoint: str | None = None
    """vLLM's flag: an OTLP/HTTP URL (…/v1/traces) each finished request's `llm_request` span is sent to."""
    stream_interval: int = 1
    """vLLM's flag: tokens gathered into one streamed chunk (`engine.due_now`)."""

    def sim_info(self) -> dict[str, str]:
        """The flags that shape timings, as strings: tells one simulator run from a restart with others."""
        config = self.config
        return {
            "gpu": config.device.name,
            "model": config.layout.name,
            "bits": str(config.bits),
            "max_num_batched_tokens": str(config.max_num_batched_tokens),
            "max_num_seqs": str(config.max_num_seqs),
            "gpu_memory_utilization": str(config.gpu_memory_utilization),
            "enable_prefix_caching": str(config.enable_prefix_caching),
            "enable_chunked_prefill": str(config.enable_chunked_prefill),
            "max_model_len": str(config.model_len),
            "time_scale": str(self.time_scale),
            "eos_probability": str(self.eos_probability),
            "api": self.api,
            **({"stream_interval": str(self.stream_interval)} if self.stream_interval != 1 else {}),
            **(config.speculation.sim_info() if config.speculation is not None else {}),
            **({"role": self.role} if self.role else {}),
            **dict(self.disaggregation),
        }
