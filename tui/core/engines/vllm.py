"""vLLM: V1's /metrics names with their ≤0.10 and ≤0.14 forms (wire-formats.md), its flags."""

from tui.core.engines.engine import Engine, Knobs

PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
"""The `source` label values of `vllm:prompt_tokens_by_source_total`; together they are every prompt token."""
ACCEPTED_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
"""Accepted drafts by their `position` label (0 first)."""
CONFIG_INFO = "vllm:cache_config_info"

VLLM = Engine(
    name="vllm",
    title="vLLM",
    metric_prefix="vllm:",
    gauges={
        "running": ("vllm:num_requests_running",),
        "waiting": ("vllm:num_requests_waiting",),
        "kv_cache_usage": ("vllm:kv_cache_usage_perc",  # a fraction 0–1 despite "perc"
                           "vllm:gpu_cache_usage_perc"),  # ≤0.10 name, also a fraction
    },
    counters={
        "preemptions_total": ("vllm:num_preemptions_total",),
        "prompt_tokens_total": ("vllm:prompt_tokens_total",),
        "generation_tokens_total": ("vllm:generation_tokens_total",),
        "prefix_cache_queries_total": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
        "prefix_cache_hits_total": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        "prompt_tokens_cached_total": ("vllm:prompt_tokens_cached_total",),  # local + external cache hits, in tokens
        "est_read_bytes_total": ("vllm:estimated_read_bytes_per_gpu_total",),  # --enable-mfu-metrics; 0 without it
        "est_flops_total": ("vllm:estimated_flops_per_gpu_total",),  # the same flag's FLOPs
        "spec_drafts_total": ("vllm:spec_decode_num_drafts_total",),
        "spec_draft_tokens_total": ("vllm:spec_decode_num_draft_tokens_total",),
        "spec_accepted_tokens_total": ("vllm:spec_decode_num_accepted_tokens_total",),
    },
    histograms={
        "ttft_s": ("vllm:time_to_first_token_seconds",),
        "itl_s": ("vllm:inter_token_latency_seconds",
                  "vllm:time_per_output_token_seconds"),  # ≤0.14 name
        "e2e_s": ("vllm:e2e_request_latency_seconds",),
        "queue_s": ("vllm:request_queue_time_seconds",),
        "prefill_s": ("vllm:request_prefill_time_seconds",),
        "decode_s": ("vllm:request_decode_time_seconds",),
        "iteration_tokens": ("vllm:iteration_tokens_total",),  # tokens per engine step, despite the name
    },
    labelled_gauges={
        "waiting_capacity": ("vllm:num_requests_waiting_by_reason", "reason", "capacity"),
        "waiting_deferred": ("vllm:num_requests_waiting_by_reason", "reason", "deferred"),
    },
    labelled_counters={f"prompt_tokens_{source}_total": ("vllm:prompt_tokens_by_source_total", "source", source)
                       for source in PROMPT_SOURCES},
    config_info=(CONFIG_INFO,),
    knobs=Knobs(
        kv_room="raise --gpu-memory-utilization, lower --max-model-len",
        more_slots="raise --max-num-seqs",
        prefix_cache="enable prefix caching (--enable-prefix-caching)",
        prefill_batch="--max-num-batched-tokens",
        offload_check=None,
        threads="VLLM_CPU_OMP_THREADS_BIND",
        weights="--quantization fp8",
        kv_dtype="--kv-cache-dtype fp8",
    ),
    command_marks=("vllm",),
    default_port=8000,
    metrics_on="without --disable-log-stats",
)
