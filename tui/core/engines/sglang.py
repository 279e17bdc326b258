"""SGLang 0.5: its /metrics names (with --enable-metrics), its flags."""

from tui.core.engines.engine import Engine, Knobs

SGLANG = Engine(
    name="sglang",
    title="SGLang",
    metric_prefix="sglang:",
    gauges={
        "running": ("sglang:num_running_reqs",),
        "waiting": ("sglang:num_queue_reqs",),
        "kv_cache_usage": ("sglang:token_usage",),
        "prefix_cache_hit_rate": ("sglang:cache_hit_rate",),
    },
    counters={
        "prompt_tokens_total": ("sglang:prompt_tokens_total",),
        "generation_tokens_total": ("sglang:generation_tokens_total",),
    },
    histograms={
        "ttft_s": ("sglang:time_to_first_token_seconds",),
        "itl_s": ("sglang:inter_token_latency_seconds",),
        "e2e_s": ("sglang:e2e_request_latency_seconds",),
        "queue_s": ("sglang:queue_time_seconds",),
    },
    config_gauges={
        "sglang:context_len": "context_len",
        "sglang:max_total_num_tokens": "max_total_num_tokens",
        "sglang:page_size": "page_size",
    },
    replica_labels=("tp_rank", "pp_rank", "moe_ep_rank"),  # gauges per rank with --enable-metrics-for-all-schedulers
    knobs=Knobs(
        kv_room="raise --mem-fraction-static, lower --context-length",
        more_slots="raise --max-running-requests",
        prefix_cache="keep the prefix identical (the radix cache reuses it unless --disable-radix-cache is set)",
        prefill_batch="--chunked-prefill-size",
        offload_check=None,
        threads="SGLANG_CPU_OMP_THREADS_BIND",
        weights="--quantization fp8",
        kv_dtype="--kv-cache-dtype fp8_e5m2",
    ),
    command_marks=("sglang",),
    default_port=30000,
    metrics_on="with --enable-metrics",
)
