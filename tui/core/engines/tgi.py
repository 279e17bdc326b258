"""Hugging Face TGI 3.x: its /metrics names (read by the fleet and `metrics`; phasetop sends it nothing of its own)."""

from tui.core.engines.engine import Engine

TGI = Engine(
    name="tgi",
    title="TGI",
    metric_prefix="tgi_",
    gauges={
        "running": ("tgi_batch_current_size",),
        "waiting": ("tgi_queue_size",),
    },
    counters={
        "prompt_tokens_total": ("tgi_request_input_length_sum",),
        "generation_tokens_total": ("tgi_request_generated_tokens_sum",),
    },
    histograms={
        "itl_s": ("tgi_request_mean_time_per_token_duration",),
        "e2e_s": ("tgi_request_duration",),
        "queue_s": ("tgi_request_queue_duration",),
    },
    config_gauges={"tgi_batch_max_total_tokens": "max_total_tokens"},
    metrics_on="",  # always on
)
