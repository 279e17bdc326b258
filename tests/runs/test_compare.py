"""compare_runs on fixed runs: deltas from the raw requests, the config diff, bench throughputs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tui.core.runs.run_record import compare_runs, new_run, run_header

T0 = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def request(ttft_s: float, gaps: list[float], ok: bool = True) -> dict:
    offsets = [ttft_s]
    for gap in gaps:
        offsets.append(offsets[-1] + gap)
    decode_s = offsets[-1] - ttft_s
    return {"ok": ok, "ttft_s": ttft_s, "itl_s": gaps, "e2e_s": offsets[-1], "tpot_s": decode_s / len(gaps),
            "decode_tok_s": len(gaps) / decode_s, "prefill_tok_s": 1000 / ttft_s, "token_offsets_s": offsets}


def server(flags: dict | None = None, config: dict | None = None, start: float | None = 100.0, **identity) -> dict:
    return {"url": "http://h:8000", "kind": "openai", "model": "m", "version": "0.33.0", "max_model_len": 4096,
            "engine_config": config, "process_start_time": start, "simulator_flags": flags, **identity}


def run(kind="probe", srv=None, requests=(), params=None, **result) -> dict:
    return new_run(kind, params or {"max_tokens": 4}, srv or server(), list(requests), result, T0, T0)


def figure(comparison: dict, name: str, stat: str) -> dict:
    return next(f for f in comparison["figures"] if (f["figure"], f["stat"]) == (name, stat))


def test_new_run_fills_schema_id_version_and_utc_times():
    made = run()
    assert made["schema"] == 1
    assert made["id"].startswith("20260301-120000-probe-") and len(made["id"]) == len("20260301-120000-probe-") + 4
    assert made["started"] == "2026-03-01T12:00:00.123Z"
    assert made["phasetop_version"]
    assert run()["id"] != made["id"]  # four random hex chars keep same-second runs apart


def test_figures_and_deltas_come_from_the_requests():
    before = run(requests=[request(0.100, [0.010] * 4), request(0.200, [0.010] * 4), request(9.0, [0.5], ok=False)])
    after = run(requests=[request(0.300, [0.020] * 4), request(0.500, [0.020] * 4)])
    comparison = compare_runs(before, after)
    ttft = figure(comparison, "ttft_s", "p50")
    assert ttft["before"] == pytest.approx(0.150)  # the failed request is left out
    assert ttft["after"] == pytest.approx(0.400)
    assert ttft["delta"] == pytest.approx(0.250)
    assert ttft["delta_pct"] == pytest.approx(100 * 0.25 / 0.15)
    assert figure(comparison, "ttft_s", "p99")["after"] == pytest.approx(0.300 + 0.2 * 0.99)
    assert figure(comparison, "itl_s", "p50")["delta"] == pytest.approx(0.010)
    assert figure(comparison, "decode_tok_s", "p50")["after"] == pytest.approx(50.0)
    assert {(f["figure"], f["stat"]) for f in comparison["figures"]} == {
        ("ttft_s", "p50"), ("ttft_s", "p99"), ("itl_s", "p50"), ("itl_s", "p99"), ("itl_s", "max"), ("tpot_s", "p50"),
        ("decode_tok_s", "p50"), ("prefill_tok_s", "p50"), ("e2e_s", "p50"),
    }
    worst = figure(comparison, "itl_s", "max")
    assert (worst["before"], worst["after"]) == (pytest.approx(0.010), pytest.approx(0.020)), "not the failed request's 0.5 s"
    assert comparison["before"]["summary"].startswith("2 requests (1 failed), TTFT p50 150.0 ms")


def test_config_diff_names_the_changed_flag_once():
    before = run(srv=server({"max_num_batched_tokens": "2048", "enable_prefix_caching": "True"}, {"enable_prefix_caching": "True", "block_size": "16"}))
    after = run(srv=server({"max_num_batched_tokens": "512", "enable_prefix_caching": "False"}, {"enable_prefix_caching": "False", "block_size": "16"}, start=200.0, max_model_len=8192))
    comparison = compare_runs(before, after)
    assert comparison["config_diff"] == [
        {"key": "max_model_len", "before": "4096", "after": "8192", "source": "server"},
        {"key": "enable_prefix_caching", "before": "True", "after": "False", "source": "simulator_flags"},
        {"key": "max_num_batched_tokens", "before": "2048", "after": "512", "source": "simulator_flags"},
    ]
    assert comparison["restarted"] is True
    assert compare_runs(before, before)["config_diff"] == []
    assert compare_runs(before, before)["restarted"] is False
    assert compare_runs(run(srv=server(start=None)), before)["restarted"] is None


def test_params_diff_and_missing_config_sections():
    before = run(srv=server(None, None), params={"prompt_tokens": 200, "max_tokens": 64})
    after = run(srv=server(None, {"block_size": "16"}), params={"prompt_tokens": 2000, "max_tokens": 64})
    comparison = compare_runs(before, after)
    assert comparison["params_diff"] == [{"key": "prompt_tokens", "before": "200", "after": "2000", "source": "params"}]
    assert comparison["config_diff"] == [{"key": "block_size", "before": None, "after": "16", "source": "engine_config"}]
    assert figure(comparison, "ttft_s", "p50") == {
        "figure": "ttft_s", "stat": "p50", "label": "TTFT p50", "unit": "s",
        "before": None, "after": None, "delta": None, "delta_pct": None,
        "ci_low": None, "ci_high": None, "level": 0.99, "verdict": "not_enough_data", "more_requests": None,
        "before_ci": None, "after_ci": None, "n_before": 0, "n_after": 0, "practical_pct": 5.0,
    }


def test_bench_throughputs_only_between_two_bench_runs():
    before = run("bench", request_throughput=2.0, output_throughput=256.0, total_token_throughput=1000.0)
    after = run("bench", request_throughput=3.0, output_throughput=384.0, total_token_throughput=1500.0)
    comparison = compare_runs(before, after)
    throughput = figure(comparison, "request_throughput", "value")
    assert (throughput["before"], throughput["after"], throughput["delta"], throughput["delta_pct"]) == (2.0, 3.0, 1.0, 50.0)
    assert figure(comparison, "output_throughput", "value")["unit"] == "tok/s"
    assert not any(f["figure"] == "request_goodput" for f in comparison["figures"])  # neither run had it
    assert not any(f["stat"] == "value" for f in compare_runs(run(), after)["figures"])


def test_header_carries_a_sweep_finding():
    sweep = run("sweep", finding="TTFT ×9.6 from 200 to 2,000 tokens;\ndecode −3 %")
    header = run_header(sweep)
    assert header["kind"] == "sweep"
    assert header["summary"] == "0 requests, TTFT ×9.6 from 200 to 2,000 tokens; decode −3 %"


def test_requests_timed_in_bursts_stay_out_of_the_compare():
    clumped = {**request(0.900, [0.00003] * 4), "burst": "4 of 4 gaps under 0.2 ms: the client read in clumps"}
    before = run(requests=[request(0.100, [0.010] * 4), clumped])
    after = run(requests=[request(0.300, [0.020] * 4)])
    comparison = compare_runs(before, after)
    assert figure(comparison, "ttft_s", "p50")["before"] == pytest.approx(0.100)  # not the clumped 0.9 s
    assert figure(comparison, "itl_s", "p50")["before"] == pytest.approx(0.010)
    assert comparison["bursts_excluded"] == {"before": 1, "after": 0}


def test_a_flag_only_the_command_line_shows_is_named_from_it():
    # Real vLLM publishes no scheduler setting in /metrics; a local server's argv does.
    before = run(srv={**server(config={"enable_prefix_caching": "True"}),
                      "command_flags": {"max_num_batched_tokens": "2048", "enforce_eager": "True"}})
    after = run(srv={**server(config={"enable_prefix_caching": "False"}, start=200.0),
                     "command_flags": {"max_num_batched_tokens": "512", "enforce_eager": "True", "enable_prefix_caching": "False"}})
    assert compare_runs(before, after)["config_diff"] == [  # the server's own word on prefix caching, once
        {"key": "enable_prefix_caching", "before": "True", "after": "False", "source": "engine_config"},
        {"key": "max_num_batched_tokens", "before": "2048", "after": "512", "source": "command_line"},
    ]


def test_a_different_kind_or_workload_is_named_and_who_ran_it_is_not():
    bench = run("bench", params={"num_prompts": 8, "source": "phasetop tune", "settings": {"max-num-seqs": "4"}})
    other_tune = run("bench", params={"num_prompts": 8, "source": "phasetop tune", "settings": {"max-num-seqs": "8"}})
    assert compare_runs(bench, other_tune)["workload_differs"] == [], "a tune's settings are the server's flags"
    assert compare_runs(bench, other_tune)["params_diff"] == []
    sweep = run("sweep", params={"num_prompts": 16})
    assert compare_runs(bench, sweep)["workload_differs"] == ["kind bench → sweep", "num_prompts 8 → 16"]


def test_phasetops_own_launcher_argument_is_no_server_flag():
    from tui.core.serving.command_flags import command_flags

    assert command_flags(["python", "-m", "tui", "sim", "--port", "0", "--stop-on-stdin-close", "--max-num-seqs", "8"]) == {
        "max_num_seqs": "8"}
