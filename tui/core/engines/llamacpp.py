"""llama.cpp's llama-server: its /metrics names (with --metrics), its flags."""

from tui.core.engines.engine import Engine, Knobs

PROMPT_TOKENS_CACHED = "llamacpp:prompt_tokens_cached_total"
"""Prompt tokens taken from its cache (newer builds), counted apart from those computed: their sum is the queries."""

LLAMACPP = Engine(
    name="llamacpp",
    title="llama.cpp",
    metric_prefix="llamacpp:",
    gauges={
        "running": ("llamacpp:requests_processing",),
        "waiting": ("llamacpp:requests_deferred",),
        "kv_cache_usage": ("llamacpp:kv_cache_usage_ratio",),  # old builds only
    },
    counters={
        "prompt_tokens_total": ("llamacpp:prompt_tokens_total",),
        "generation_tokens_total": ("llamacpp:tokens_predicted_total",),
        "prefix_cache_hits_total": (PROMPT_TOKENS_CACHED,),
        "spec_drafts_total": ("llamacpp:spec_decode_num_drafts_total",),
        "spec_draft_tokens_total": ("llamacpp:spec_decode_num_draft_tokens_total",),
        "spec_accepted_tokens_total": ("llamacpp:spec_decode_num_accepted_tokens_total",),
    },
    knobs=Knobs(
        kv_room="raise -c/--ctx-size (the KV pool its -np slots share)",
        more_slots="raise -np/--parallel (and -c with it: the slots split it)",
        prefix_cache="keep its start identical (cache_prompt reuses a slot's prefix; --cache-reuse N a shifted one)",
        prefill_batch="-b/-ub (the batch sizes)",
        offload_check="check every layer is on the GPU (-ngl 99)",
        threads="-t/--threads",
        weights="a smaller quantized GGUF, e.g. Q4_K_M instead of Q8_0 or F16",
        kv_dtype="-ctk q8_0 -ctv q8_0",
    ),
    command_marks=("llama-server", "llama_cpp", "llama-cpp"),
    default_port=8080,
    metrics_on="with --metrics",
)
