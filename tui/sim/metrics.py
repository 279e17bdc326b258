"""`/metrics` as vLLM V1 serves it: same names, labels `model_name` and `engine`, same buckets.

Counters and gauges are read from the live engine at scrape time (one source of truth); the
histograms are observed as vLLM observes them: TTFT and ITL per step, the rest when a request ends.
A scrape reads every value in one go, between two of the loop's callbacks: one snapshot, with the
histograms as of the last step's end and the engine's counters counting the step under way (a step's
outcome is applied at its start), so the two are at most one step apart.
"""

from __future__ import annotations

import time

import psutil

from tui.sim.blocks import BLOCK_SIZE
from tui.sim.engine import EngineDriver
from tui.sim.exposition import Exposition, Histogram, Series, counter, gauge, histogram
from tui.sim.physics import Sequence, StepPlan, TokenOut
from tui.sim.step_cost import step_traffic

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0)
REQUEST_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                           120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
ITERATION_TOKEN_BUCKETS = (1.0, *(2.0**i for i in range(3, 15)))
"""1, 8, 16, …, 16384: vLLM's `ITERATION_TOKENS_BUCKETS`."""
ENGINE = "0"
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
"""vLLM's `source` label values; external transfers count on a disaggregated simulator's decode workers."""


def token_buckets(max_model_len: int) -> tuple[float, ...]:
    """vLLM's 1-2-5 buckets up to max_model_len, for token-count histograms."""
    buckets, mantissa, exponent = [], (1, 2, 5), 0
    while True:
        for m in mantissa:
            value = m * 10**exponent
            if value > max_model_len:
                return tuple(float(b) for b in buckets)
            buckets.append(value)
        exponent += 1


class SimMetrics:
    """The series behind `/metrics`, and the hook the engine driver calls after each step."""

    def __init__(self, driver: EngineDriver, model_name: str, sim_info: dict[str, str], enable_mfu_metrics: bool = False,
                 engine: str = ENGINE, role: str | None = None) -> None:
        self.driver = driver
        self.model_name = model_name
        self.engine = engine
        self.role = role
        """A disaggregated worker's `role` label ("prefill", "decode") on every series; None: no such label."""
        self.sim_info = sim_info
        self.enable_mfu_metrics = enable_mfu_metrics
        self.start_time = psutil.Process().create_time()
        self.created = time.time()
        """When the counters were made: their `_created` samples, as prometheus_client stamps vLLM's."""
        self.flops = self.read_bytes = self.write_bytes = 0.0
        self.finished: dict[str, int] = {"stop": 0, "length": 0, "abort": 0}
        tokens = token_buckets(driver.config.model_len)
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.tpot = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(REQUEST_LATENCY_BUCKETS)
        self.queue = Histogram(REQUEST_LATENCY_BUCKETS)
        self.prefill = Histogram(REQUEST_LATENCY_BUCKETS)
        self.decode = Histogram(REQUEST_LATENCY_BUCKETS)
        self.inference = Histogram(REQUEST_LATENCY_BUCKETS)
        self.iteration = Histogram(ITERATION_TOKEN_BUCKETS)
        self.prompt_len = Histogram(tokens)
        self.generation_len = Histogram(tokens)
        self.prefill_kv_computed = Histogram(tokens)
        self.series = self._series()
        """Every family served, in vLLM's order: the histograms first, as its registry holds them."""
        self.template = Exposition(self.series)
        """The text of every series with the values left out: each scrape fills them in."""

    def exposition(self) -> bytes:
        """The text format of every series, from a snapshot of their values (see `exposition.Exposition`)."""
        return self.template.render()

    def on_step(self, plan: StepPlan, tokens: list[TokenOut], end: float) -> None:
        """Observe one finished step: tokens per step, TTFT or ITL per token, phase times per finished request.

        Tokens per step are counted as vLLM's frontend counts them: the tokens sampled, plus the whole
        computed prompt of each request whose first token came out (chunks before it count nowhere).
        """
        if self.enable_mfu_metrics:
            traffic = step_traffic(self.driver.config, [(item.new_tokens, item.context_before) for item in plan.items])
            self.flops += traffic.flops
            self.read_bytes += traffic.read_bytes
            self.write_bytes += traffic.write_bytes
        prefilled = 0
        gaps: dict[float, int] = {}  # a decode step's gaps are mostly one value: observed once, with a count
        for token in tokens:
            sequence = token.sequence
            gap = token.gap
            if token.index == 0:
                prefilled += sequence.prompt_tokens - (sequence.cached_tokens or 0)
                self.ttft.observe(end - sequence.arrival)
            elif gap is not None:  # a speculative step's tokens share one gap, its first's (vLLM's ITL is per step)
                gaps[gap] = gaps.get(gap, 0) + 1
            if token.finished:
                self._observe_finished(sequence)
        for gap, count in gaps.items():
            self.itl.observe(gap, count)
        self.iteration.observe(prefilled + len(tokens))

    def count_abort(self) -> None:
        self.finished["abort"] += 1

    def _observe_finished(self, sequence: Sequence) -> None:
        self.finished[sequence.finish_reason] += 1
        scheduled = sequence.scheduled_at if sequence.scheduled_at is not None else sequence.arrival
        first, last = sequence.first_token_at, sequence.last_token_at
        self.e2e.observe(last - sequence.arrival)
        self.queue.observe(scheduled - sequence.arrival)
        self.prefill.observe(first - scheduled)
        self.decode.observe(last - first)
        self.inference.observe(last - scheduled)
        if sequence.output_tokens > 1:
            self.tpot.observe((last - first) / (sequence.output_tokens - 1))
        self.prompt_len.observe(sequence.prompt_tokens)
        self.prefill_kv_computed.observe(sequence.prompt_tokens - (sequence.cached_tokens or 0))
        self.generation_len.observe(sequence.output_tokens)

    def _series(self) -> list[Series]:
        """vLLM's histograms, then the counters and gauges read from the engine at scrape time, then the info metrics."""
        engine = self.driver.engine
        names, values = self._labels()
        labels = dict(zip(names, values))
        created = self.created
        histograms = [
            histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels, self.ttft),
            histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", labels, self.itl),
            histogram("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.",
                      labels, self.tpot),
            histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", labels, self.e2e),
            histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", labels,
                      self.queue),
            histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", labels,
                      self.prefill),
            histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", labels,
                      self.decode),
            histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", labels,
                      self.inference),
            histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", labels, self.iteration),
            histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", labels, self.prompt_len),
            histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", labels, self.generation_len),
            histogram("vllm:request_prefill_kv_computed_tokens",
                      "Histogram of new KV tokens computed during prefill (excluding cached tokens).", labels,
                      self.prefill_kv_computed),
        ]
        counts = engine.counters
        mfu = "(for Model Flops Utilization calculations)."
        cache_labels = self._cache_labels()
        info_labels = {**self.sim_info, **dict(zip(names[2:], values[2:]))}
        return [
            *histograms,
            gauge("vllm:num_requests_running", "Number of requests in model execution batches.", labels,
                  lambda: len(engine.running)),
            gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels,
                  lambda: len(engine.waiting) + len(engine.receiving)),
            # A waiting request waits for capacity (seats, token budget, KV blocks) or, on a decode worker, for its KV
            # to arrive (deferred); vLLM also defers for LoRA slots and grammars, which the simulator has not.
            gauge("vllm:num_requests_waiting_by_reason",
                  "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; "
                  "'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). "
                  "Sum of all reasons equals vllm:num_requests_waiting.",
                  labels, lambda: (len(engine.waiting), len(engine.receiving)), by=("reason", ("capacity", "deferred"))),
            gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels,
                  lambda: engine.kv_cache_usage),
            counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", labels,
                    lambda: counts.preemptions, created),
            counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels, lambda: counts.prompt_tokens, created),
            counter("vllm:generation_tokens", "Number of generation tokens processed.", labels,
                    lambda: counts.generation_tokens, created),
            counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", labels,
                    lambda: counts.prefix_cache_queries, created),
            counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", labels,
                    lambda: counts.prefix_cache_hits, created),
            counter("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", labels,
                    lambda: (counts.prompt_tokens_computed, counts.prompt_tokens_cached - counts.prompt_tokens_external,
                             counts.prompt_tokens_external), created,
                    by=("source", PROMPT_SOURCES)),
            counter("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).", labels,
                    lambda: counts.prompt_tokens_cached, created),
            counter("vllm:request_success", "Count of successfully processed requests.", labels,
                    lambda: tuple(self.finished.values()), created, by=("finished_reason", tuple(self.finished))),
            counter("vllm:estimated_flops_per_gpu", f"Estimated number of floating point operations per GPU {mfu}", labels,
                    lambda: self.flops, created),
            counter("vllm:estimated_read_bytes_per_gpu", f"Estimated number of bytes read from memory per GPU {mfu}", labels,
                    lambda: self.read_bytes, created),
            counter("vllm:estimated_write_bytes_per_gpu", f"Estimated number of bytes written to memory per GPU {mfu}",
                    labels, lambda: self.write_bytes, created),
            *self._speculation_series(labels, created),
            gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", cache_labels, lambda: 1),
            gauge("phasetop_sim_info", "The phasetop simulator's device, model and flags.", info_labels, lambda: 1),
            gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", {},
                  lambda: self.start_time),
        ]

    def _speculation_series(self, labels: dict[str, str], created: float) -> list[Series]:
        """vLLM's spec_decode counters, served only by a simulator that speculates (as vLLM registers them)."""
        speculation = self.driver.config.speculation
        if speculation is None:
            return []
        verified = self.driver.engine.counters.speculation
        positions = tuple(str(p) for p in range(speculation.k))

        def per_position() -> tuple[int, ...]:
            counts = verified.accepted_per_position
            return tuple(counts[p] if p < len(counts) else 0 for p in range(speculation.k))

        return [
            counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", labels, lambda: verified.drafts,
                    created),
            counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", labels,
                    lambda: verified.draft_tokens, created),
            counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", labels,
                    lambda: verified.accepted_tokens, created),
            counter("vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.", labels,
                    per_position, created, by=("position", positions)),
        ]

    def _labels(self) -> tuple[list[str], list[str]]:
        """Every series' label names and values: model and engine, and a worker's role."""
        names, values = ["model_name", "engine"], [self.model_name, self.engine]
        if self.role is not None:
            names.append("role")
            values.append(self.role)
        return names, values

    def _cache_labels(self) -> dict[str, str]:
        """`str()` of every field of vLLM 0.32's `CacheConfig`, as its `metrics_info()` gives them, plus `engine`.

        The values are what a CUDA engine with this sim's flags would report; fields the frontend never
        learns (resolved in the engine core only) stay "None" there too.
        """
        config = self.driver.config
        blocks = config.num_gpu_blocks
        tokens = blocks * BLOCK_SIZE
        return {
            "block_size": str(BLOCK_SIZE),
            "user_specified_block_size": "False",
            "kv_cache_layout": "None",
            "prefix_match_unit": "None",
            "gpu_memory_utilization": str(config.gpu_memory_utilization),
            "cache_dtype": "auto",
            "is_attention_free": "False",
            "num_gpu_blocks_override": "None",
            "sliding_window": "None",
            "enable_prefix_caching": str(config.enable_prefix_caching),
            "prefix_caching_hash_algo": "sha256",
            "prefix_cache_retention_interval": "0",
            "kv_cache_dtype_skip_layers": "[]",
            "mamba_page_size_padded": "None",
            "skip_page_size_padded": "None",
            "mamba_block_size": "None",
            "mamba_cache_dtype": "auto",
            "mamba_ssm_cache_dtype": "auto",
            "mamba_cache_mode": "none",
            "enable_mamba_shared_prefix_checkpoint": "False",
            "replayssm_buffer_len": "16",
            "use_replayssm": "False",
            "use_kda_recoverssm": "False",
            "num_gpu_blocks": str(blocks),
            "num_cpu_blocks": "None",
            "effective_attention_block_size": str(BLOCK_SIZE),
            "kv_cache_size_tokens": str(tokens),
            "kv_cache_max_concurrency": str(tokens / config.model_len),
            "hash_block_size": "None",
            "cache_hit_alignment_tokens": "None",
            "kv_sharing_fast_prefill": "False",
            "swa_bounded_replay": "True",
            "kv_cache_memory_bytes": str(int(tokens * config.kv_bytes_per_token)),
            "kv_offloading_size": "None",
            "kv_offloading_backend": "native",
            "engine": self.engine,
            **({"role": self.role} if self.role is not None else {}),
        }
