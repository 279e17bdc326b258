"""Raw /metrics names per engine and version → canonical fields, read from the fixture texts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.core.telemetry.metric_names import read_scrape, read_wanted, wanted_lines

FIXTURES = Path(__file__).parents[1] / "fixtures" / "metrics"


def read(name: str):
    return read_scrape((FIXTURES / name).read_text(), t_mono=0.0, t_unix=0.0)


def test_vllm_v1_sums_over_engines_and_averages_kv_usage():
    r = read("vllm-0.33.txt")
    assert r.engine == "vllm"
    # kv_cache_size_tokens: 432,000 per engine in cache_config_info, two engines (two pools).
    assert r.gauges == {"running": 5.0, "waiting": 1.0, "kv_cache_usage": 0.375, "kv_cache_size_tokens": 864000.0}
    assert r.counters["prompt_tokens_total"] == 8000.0
    assert r.counters["generation_tokens_total"] == 1500.0
    assert r.counters["preemptions_total"] == 3.0
    assert r.counters["prefix_cache_hits_total"] == 500.0
    assert r.histograms["ttft_s"].count == 5.0
    assert dict(r.histograms["ttft_s"].buckets)[0.25] == 3.0  # 0.03, 0.2 (engine 0) and 0.05 (engine 1)
    assert r.engine_config["num_gpu_blocks"] == "27000"
    assert "engine" not in r.engine_config
    assert r.process_start_s == 1.7645e9
    assert r.source_names["kv_cache_usage"] == "vllm:kv_cache_usage_perc"
    assert r.source_names["itl_s"] == "vllm:inter_token_latency_seconds"


def test_vllm_old_names_without_engine_label():
    r = read("vllm-0.10.txt")
    assert r.gauges["kv_cache_usage"] == 0.75
    assert r.source_names["kv_cache_usage"] == "vllm:gpu_cache_usage_perc"
    assert r.source_names["itl_s"] == "vllm:time_per_output_token_seconds"
    assert r.source_names["prefix_cache_hits_total"] == "vllm:gpu_prefix_cache_hits_total"
    assert r.counters["prefix_cache_queries_total"] == 800.0
    assert r.histograms["itl_s"].count == 8.0
    assert r.engine_config["enable_prefix_caching"] == "False"


def test_sglang_keeps_tp_rank_zero_and_reads_its_gauges():
    r = read("sglang-0.5.txt")
    assert r.engine == "sglang"
    assert r.gauges["running"] == 6.0  # rank 1 repeats rank 0's gauges: not doubled
    assert r.gauges["kv_cache_usage"] == 0.4
    assert r.gauges["prefix_cache_hit_rate"] == 0.35
    assert r.counters["prompt_tokens_total"] == 7000.0
    assert r.histograms["ttft_s"].count == 3.0  # summed over is_streaming
    assert r.histograms["queue_s"].buckets[0] == (0.0, 1.0)
    assert r.engine_config["context_len"] == "32768"
    assert "prefill_s" not in r.histograms


def test_llamacpp_counters_and_no_histograms():
    r = read("llamacpp.txt")
    assert r.engine == "llamacpp"
    assert r.gauges == {"running": 1.0, "waiting": 0.0}
    assert r.counters == {"prompt_tokens_total": 1500.0, "generation_tokens_total": 640.0}
    assert r.histograms == {}
    assert r.source_names["generation_tokens_total"] == "llamacpp:tokens_predicted_total"


def test_tgi_names_with_and_without_total():
    text = (
        "# TYPE tgi_queue_size gauge\ntgi_queue_size 4\n"
        "# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size 9\n"
        "# TYPE tgi_request_duration histogram\n"
        'tgi_request_duration_bucket{le="0.5"} 1\ntgi_request_duration_bucket{le="+Inf"} 3\n'
        "tgi_request_duration_sum 4.2\ntgi_request_duration_count 3\n"
    )
    r = read_scrape(text, 0.0, 0.0)
    assert r.engine == "tgi"
    assert r.gauges == {"running": 9.0, "waiting": 4.0}
    assert r.histograms["e2e_s"].count == 3.0


def test_unknown_text_reads_as_no_engine_and_bad_text_raises():
    assert read_scrape("# TYPE up gauge\nup 1\n", 0.0, 0.0).engine is None
    with pytest.raises(ValueError):
        read_scrape("<html>not metrics</html>\n", 0.0, 0.0)


def test_llamacpp_b11434_cached_prompt_tokens_give_the_prefix_hit_rate():
    """Captured from llama-server b11434 after a 226-token prompt and its repeat (221 tokens from the cache)."""
    r = read("llamacpp-b11434.txt")
    assert r.engine == "llamacpp"
    assert r.counters["prompt_tokens_total"] == 231  # computed tokens only: 226 + 5
    assert r.counters["prefix_cache_hits_total"] == 221
    assert r.counters["prefix_cache_queries_total"] == 231 + 221
    assert r.source_names["prefix_cache_hits_total"] == "llamacpp:prompt_tokens_cached_total"
    assert r.counters["generation_tokens_total"] == 68
    assert r.gauges == {"running": 0.0, "waiting": 0.0}


def test_vllm_032_reads_the_new_families_and_ignores_created_samples():
    """vLLM 0.32's wire: labels sorted (`le` inside), `_created` families, waiting by reason, prompt tokens by source."""
    r = read("vllm-0.32.txt")
    assert r.engine == "vllm"
    assert r.gauges["waiting"] == 5.0
    assert r.gauges["waiting_capacity"] == 4.0 and r.gauges["waiting_deferred"] == 1.0
    assert r.source_names["waiting_capacity"] == 'vllm:num_requests_waiting_by_reason{reason="capacity"}'
    assert r.gauges["kv_cache_size_tokens"] == 32768.0
    assert r.counters["prompt_tokens_total"] == 12000.0  # not 12000 + the by-source split: another family
    assert r.counters["prompt_tokens_cached_total"] == 5000.0
    assert r.counters["prompt_tokens_local_compute_total"] == 7000.0
    assert r.counters["prompt_tokens_local_cache_hit_total"] == 4800.0
    assert r.counters["prompt_tokens_external_kv_transfer_total"] == 200.0
    assert r.counters["est_read_bytes_total"] == 3.0e11
    assert r.source_names["est_read_bytes_total"] == "vllm:estimated_read_bytes_per_gpu_total"
    assert r.counters["generation_tokens_total"] == 3000.0  # a `_created` sample (1.76e9) would swamp it
    ttft = r.histograms["ttft_s"]
    assert ttft.count == 12.0 and dict(ttft.buckets)[0.01] == 8.0 and dict(ttft.buckets)[0.06] == 12.0
    assert r.histograms["itl_s"].count == 2988.0
    assert r.engine_config["kv_cache_size_tokens"] == "32768" and r.engine_config["num_gpu_blocks"] == "2048"
    assert r.process_start_s == 1764600000.0


def test_per_gpu_estimate_is_averaged_over_engines_and_sizes_summed():
    text = (
        "# TYPE vllm:estimated_read_bytes_per_gpu_total counter\n"
        'vllm:estimated_read_bytes_per_gpu_total{engine="0",model_name="m"} 4e11\n'
        'vllm:estimated_read_bytes_per_gpu_total{engine="1",model_name="m"} 2e11\n'
        "# TYPE vllm:cache_config_info gauge\n"
        'vllm:cache_config_info{engine="0",kv_cache_size_tokens="1000"} 1\n'
        'vllm:cache_config_info{engine="1",kv_cache_size_tokens="1000"} 1\n'
    )
    r = read_scrape(text, 0.0, 0.0)
    assert r.counters["est_read_bytes_total"] == 3e11  # per GPU: one engine's GPU reads this, not both together
    assert r.gauges["kv_cache_size_tokens"] == 2000.0  # two pools


def test_kv_cache_size_none_is_no_size():
    text = '# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{engine="0",kv_cache_size_tokens="None"} 1\n'
    assert "kv_cache_size_tokens" not in read_scrape(text, 0.0, 0.0).gauges


@pytest.mark.parametrize("name", sorted(p.name for p in (Path(__file__).parents[1] / "fixtures" / "metrics").glob("*.txt")))
def test_only_the_lines_read_are_parsed_and_they_read_the_same(name):
    text = (Path(__file__).parents[1] / "fixtures" / "metrics" / name).read_text()
    wanted = wanted_lines(text)
    assert len(wanted) < len(text) and not any(line.startswith("#") for line in wanted.splitlines())
    assert read_scrape(text, 1.0, 2.0) == read_wanted(text, 1.0, 2.0), "nothing read was cut"


def test_a_page_with_no_line_read_is_parsed_whole_so_bad_text_still_fails():
    assert wanted_lines("<html>oops</html>") == "<html>oops</html>"
    with pytest.raises(ValueError):
        read_scrape("<html>oops { </html>", 1.0, 2.0)
