"""`/metrics` as vLLM V1 serves it: same names, labels `model_name` and `engine`, same buckets.

Counters and gauges are read from the live engine at scrape time (one source of truth); the
histograms are observed as vLLM observes them: TTFT and ITL per step, the rest when a request ends.
"""

from __future__ import annotations

import psutil
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from tui.sim.blocks import BLOCK_SIZE
from tui.sim.engine import EngineDriver
from tui.sim.physics import Sequence, StepPlan, TokenOut

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0)
REQUEST_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                           120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
ITERATION_TOKEN_BUCKETS = tuple(2.0**i for i in range(15))
"""1, 2, 4, …, 16384 (vLLM: 1, 8, 16, … — the powers of two from the budget down)."""
ENGINE = "0"


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


class SimMetrics(Collector):
    """The registry behind `/metrics`, and the hook the engine driver calls after each step."""

    def __init__(self, driver: EngineDriver, model_name: str, sim_info: dict[str, str]) -> None:
        self.driver = driver
        self.model_name = model_name
        self.sim_info = sim_info
        self.start_time = psutil.Process().create_time()
        self.aborted = 0
        self.finished: dict[str, int] = {"stop": 0, "length": 0, "abort": 0}
        self.registry = CollectorRegistry()
        labels = ["model_name", "engine"]

        def histogram(name: str, doc: str, buckets) -> Histogram:
            return Histogram(name, doc, labels, registry=self.registry, buckets=buckets).labels(model_name, ENGINE)

        self.ttft = histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS)
        self.itl = histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS)
        self.tpot = histogram("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", ITL_BUCKETS)
        self.e2e = histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", REQUEST_LATENCY_BUCKETS)
        self.queue = histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", REQUEST_LATENCY_BUCKETS)
        self.prefill = histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", REQUEST_LATENCY_BUCKETS)
        self.decode = histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", REQUEST_LATENCY_BUCKETS)
        self.inference = histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", REQUEST_LATENCY_BUCKETS)
        self.iteration = histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITERATION_TOKEN_BUCKETS)
        tokens = token_buckets(driver.config.model_len)
        self.prompt_len = histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokens)
        self.generation_len = histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", tokens)
        self.registry.register(self)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def on_step(self, plan: StepPlan, tokens: list[TokenOut], end: float) -> None:
        """Observe one finished step: tokens per step, TTFT or ITL per token, phase times per finished request."""
        self.iteration.observe(plan.num_tokens)
        for token in tokens:
            sequence = token.sequence
            if token.gap is None:
                self.ttft.observe(end - sequence.arrival)
            else:
                self.itl.observe(token.gap)
            if token.finished:
                self._observe_finished(sequence)

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
        self.generation_len.observe(sequence.output_tokens)

    def collect(self):
        """Counters and gauges straight from the engine, plus the info metrics."""
        engine = self.driver.engine
        values = [self.model_name, ENGINE]
        labels = ["model_name", "engine"]

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, doc, labels=labels)
            family.add_metric(values, value)
            return family

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            family = CounterMetricFamily(name, doc, labels=labels)
            family.add_metric(values, value)
            return family

        yield gauge("vllm:num_requests_running", "Number of requests in model execution batches.", len(engine.running))
        yield gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", len(engine.waiting))
        yield gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", engine.kv_cache_usage)
        counts = engine.counters
        yield counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", counts.preemptions)
        yield counter("vllm:prompt_tokens", "Number of prefill tokens processed.", counts.prompt_tokens)
        yield counter("vllm:generation_tokens", "Number of generation tokens processed.", counts.generation_tokens)
        yield counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", counts.prefix_cache_queries)
        yield counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", counts.prefix_cache_hits)
        yield counter("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).", counts.prefix_cache_hits)
        success = CounterMetricFamily("vllm:request_success", "Count of successfully processed requests.",
                                      labels=[*labels, "finished_reason"])
        for reason, number in self.finished.items():
            success.add_metric([*values, reason], number)
        yield success
        cache = GaugeMetricFamily("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", labels=list(self._cache_labels()))
        cache.add_metric(list(self._cache_labels().values()), 1)
        yield cache
        info = GaugeMetricFamily("phasetop_sim_info", "The phasetop simulator's device, model and flags.", labels=list(self.sim_info))
        info.add_metric(list(self.sim_info.values()), 1)
        yield info
        yield GaugeMetricFamily("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", value=self.start_time)

    def _cache_labels(self) -> dict[str, str]:
        config = self.driver.config
        blocks = config.num_gpu_blocks
        return {
            "block_size": str(BLOCK_SIZE),
            "cache_dtype": "auto",
            "calculate_kv_scales": "False",
            "enable_prefix_caching": str(config.enable_prefix_caching),
            "engine": ENGINE,
            "gpu_memory_utilization": str(config.gpu_memory_utilization),
            "kv_cache_max_concurrency": str(round(blocks * BLOCK_SIZE / config.model_len, 2)),
            "kv_cache_size_tokens": str(blocks * BLOCK_SIZE),
            "num_cpu_blocks": "None",
            "num_gpu_blocks": str(blocks),
            "prefix_caching_hash_algo": "sha256",
            "swap_space": "4",
        }
