"""`phasetop metrics` against fixture servers whose counters advance by known amounts between scrapes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.fixtures.metrics_server import MetricsServer, bump, fixture, observe, vllm_models
from tui.cli.main import main

E0 = 'engine="0",model_name="m"'


def run_json(capsys, *argv: str) -> dict:
    assert main(["metrics", *argv, "--json"]) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out)


def test_once_json_vllm_v1(capsys):
    base = fixture("vllm-0.33.txt")
    later = bump(base, {f"vllm:generation_tokens_total{{{E0}}}": 50,
                        f"vllm:prefix_cache_queries_total{{{E0}}}": 100, f"vllm:prefix_cache_hits_total{{{E0}}}": 40})
    later = observe(later, "vllm:request_decode_time_seconds", [0.9] * 3 + [1.2] * 7, E0)
    later = observe(later, "vllm:inter_token_latency_seconds", [0.02] * 50, E0)
    with MetricsServer([base, later], models=vllm_models(32768)) as server:
        doc = run_json(capsys, "--url", server.url, "--once", "--interval", "0.2")
    assert len(doc["snapshots"]) == 1 and doc["snapshots"][0]["running"] == doc["running"]
    assert doc["engine"] == "vllm" and doc["url"] == server.url
    assert doc["window_s"] == pytest.approx(0.2, abs=0.5)
    assert doc["running"] == 5 and doc["waiting"] == 1 and doc["kv_cache_usage"] == 0.375
    assert doc["generation_tokens_total"] == 1550
    assert doc["generation_tok_s"] == pytest.approx(50 / doc["window_s"])
    assert doc["prompt_tok_s"] == 0
    assert doc["prefix_cache_hit_rate"] == pytest.approx(0.4)
    decode = doc["decode_s"]
    assert decode["n"] == 10
    assert decode["p50"] == pytest.approx(1.0 + 0.5 * (2 / 7))  # rank 5: 3 in (0.8,1.0], 7 in (1.0,1.5]
    assert decode["edges"] == {}
    itl = doc["itl_s"]
    assert itl["p50"] == pytest.approx(0.01 + 0.015 * 0.5)
    assert itl["edges"] == {}
    assert doc["engine_config"]["max_model_len"] == "32768"
    assert doc["source_names"]["itl_s"] == "vllm:inter_token_latency_seconds"
    assert doc["restart"] is None


def test_once_json_flags_a_quantile_in_the_first_bucket(capsys):
    base = fixture("vllm-0.10.txt")
    later = observe(base, "vllm:request_prefill_time_seconds", [0.04] * 9 + [0.6], 'model_name="m"')
    with MetricsServer([base, later]) as server:
        doc = run_json(capsys, "--url", server.url, "--once", "--interval", "0.05")
    prefill = doc["prefill_s"]
    assert prefill["edges"] == {"p50": "first", "p90": "first"}
    assert prefill["first_le"] == 0.3
    assert prefill["p50"] == pytest.approx(0.3 * 5 / 9)  # interpolated from 0: a bound, hence the flag
    assert doc["kv_cache_usage"] == 0.75
    assert doc["source_names"]["kv_cache_usage"] == "vllm:gpu_cache_usage_perc"


def test_once_json_sglang_and_llamacpp(capsys):
    base = fixture("sglang-0.5.txt")
    later = observe(base, "sglang:time_to_first_token_seconds", [0.5] * 4, 'engine_type="unified",is_streaming="true",model_name="m"')
    with MetricsServer([base, later]) as server:
        doc = run_json(capsys, "--url", server.url, "--once", "--interval", "0.05")
    assert doc["engine"] == "sglang"
    assert doc["running"] == 6 and doc["waiting"] == 3 and doc["kv_cache_usage"] == 0.4
    assert doc["prefix_cache_hit_rate"] == 0.35
    assert doc["ttft_s"]["p50"] == pytest.approx(0.4 + 0.2 * 0.5) and doc["ttft_s"]["n"] == 4
    assert doc["engine_config"]["context_len"] == "32768"

    base = fixture("llamacpp.txt")
    later = bump(base, {"llamacpp:prompt_tokens_total": 2000, "llamacpp:tokens_predicted_total": 30})
    with MetricsServer([base, later]) as server:
        doc = run_json(capsys, "--url", server.url, "--once", "--interval", "0.05")
    assert doc["engine"] == "llamacpp"
    assert doc["prompt_tok_s"] == pytest.approx(2000 / doc["window_s"])
    assert doc["generation_tok_s"] == pytest.approx(30 / doc["window_s"])
    assert doc["kv_cache_usage"] is None
    assert "ttft_s" not in doc  # llama.cpp has no latency histograms


def test_count_gives_one_document_with_every_snapshot(capsys):
    base = fixture("llamacpp.txt")
    bodies = [base]
    for _ in range(3):
        bodies.append(bump(bodies[-1], {"llamacpp:tokens_predicted_total": 10}))
    with MetricsServer(bodies) as server:
        doc = run_json(capsys, "--url", server.url, "--count", "3", "--interval", "0.05")
    assert [s["generation_tokens_total"] for s in doc["snapshots"]] == [650, 660, 670]
    assert all(s["window_s"] > 0 for s in doc["snapshots"])
    assert doc["generation_tokens_total"] == 670


def test_human_mode_prints_a_block_per_snapshot(capsys):
    base = fixture("vllm-0.10.txt")
    later = observe(base, "vllm:request_prefill_time_seconds", [0.04] * 10, 'model_name="m"')
    with MetricsServer([base, later]) as server:
        assert main(["metrics", "--url", server.url, "--once", "--interval", "0.05"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("vllm metrics over")
    assert "running 4  waiting 2  KV 75%" in out
    assert "prefill  p50 ≤300 ms" in out


def test_no_metrics_endpoint_is_one_clear_line(capsys):
    with MetricsServer(["x"], metrics_status=404) as server:
        assert main(["metrics", "--url", server.url, "--once", "--json"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert "exposes no Prometheus metrics" in captured.err and "Ollama" in captured.err


def test_unreachable_server_subprocess_no_traceback():
    with MetricsServer(["x"]) as server:
        url = server.url
    result = subprocess.run([sys.executable, "-m", "tui", "metrics", "--url", url, "--once", "--json"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert result.stdout == ""
    assert result.stderr.startswith("phasetop metrics: cannot connect")
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize("argv", [["--interval", "0"], ["--count", "0"]])
def test_bad_values_are_usage_errors(argv, capsys):
    assert main(["metrics", "--url", "http://127.0.0.1:1", *argv]) == 2
    assert "must be" in capsys.readouterr().err


def test_once_and_count_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["metrics", "--once", "--count", "2"])
    assert exited.value.code == 2
