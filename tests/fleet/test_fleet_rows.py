"""The pure fleet: rows from query results, the DCGM join, pools, merged percentiles, callouts, no data."""

import math

import pytest

from tui.core.fleet.instances import SATURATED_KV_USAGE, merged_latency, read_fleet_results, sort_rows
from tui.core.fleet.gpus import JoinRules, host_part
from tui.core.fleet.queries import Discovered, Want
from tui.core.telemetry.promstats import histogram_quantile

VLLM = frozenset({"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                  "vllm:generation_tokens_total", "vllm:inter_token_latency_seconds_count",
                  "vllm:prompt_tokens_by_source_total"})
ITL = "vllm:inter_token_latency_seconds"
LES = (0.01, 0.025, 0.05, 0.1, math.inf)


def labels(instance, job="vllm", **more):
    return {"job": job, "instance": instance, **more}


def instance(address, job="vllm", names=VLLM, **more):
    return Discovered(job, address, names, labels(address, job, model_name="meta-llama/Llama-3.1-8B-Instruct", **more))


def buckets(address, cumulative):
    return [(labels(address, le="+Inf" if math.isinf(le) else f"{le:g}"), c) for le, c in zip(LES, cumulative)]


def dcgm(host, gpu, field_value, model="NVIDIA H100 80GB HBM3"):
    return (({"Hostname": host, "gpu": gpu, "UUID": f"GPU-{host}-{gpu}", "modelName": model, "instance": "exporter:9400"}), field_value)


@pytest.fixture
def two():
    """Two vLLM instances: a is busy and slow, b is idle; a's host has two H100s in DCGM, b's none."""
    found = {d.key: d for d in (instance("10.0.0.1:8000"), instance("10.0.0.2:8000"))}
    a, b = "10.0.0.1:8000", "10.0.0.2:8000"
    results = {
        Want("gauge", "running", "vllm:num_requests_running"): [(labels(a), 12.0), (labels(b), 0.0)],
        Want("gauge", "waiting", "vllm:num_requests_waiting"): [(labels(a), 3.0), (labels(b), 0.0)],
        Want("gauge", "kv_cache_usage", "vllm:kv_cache_usage_perc"): [(labels(a), 0.5), (labels(b), 0.1)],
        Want("rate", "generation_tokens_total", "vllm:generation_tokens_total"): [(labels(a), 900.0), (labels(b), float("nan"))],
        Want("p99", "itl_s", ITL): [(labels(a), 0.09), (labels(b), 0.02)],
        Want("p50", "itl_s", ITL): [(labels(a), 0.03), (labels(b), 0.008)],
        Want("mean", "itl_s", ITL): [(labels(a), 0.04), (labels(b), 0.005)],
        Want("buckets", "itl_s", ITL): buckets(a, (0, 10, 50, 100, 100)) + buckets(b, (90, 100, 100, 100, 100)),
        Want("max", "up", "up"): [(labels(a), 1.0), (labels(b), 1.0)],
        Want("changes", "started", "process_start_time_seconds"): [(labels(a), 0.0), (labels(b), 0.0)],
        Want("dcgm", "dram_active", "DCGM_FI_PROF_DRAM_ACTIVE"): [dcgm("10.0.0.1", "0", 0.5), dcgm("10.0.0.1", "1", 0.25)],
        Want("dcgm", "fb_used_mib", "DCGM_FI_DEV_FB_USED"): [dcgm("10.0.0.1", "0", 70000.0)],
        Want("dcgm", "sm_active", "DCGM_FI_PROF_SM_ACTIVE"): [dcgm("10.0.0.9", "0", 0.3, model="Mystery GPU 9000")],
    }
    targets = {f"vllm/{a}": {"scrapeUrl": f"http://{a}/metrics", "lastError": ""}}
    return read_fleet_results(100.0, found, results, targets)


def test_rows_carry_each_figure_and_none_for_what_is_missing(two):
    a, b = two.instances
    assert (a.key, a.engine, a.model, a.host, a.url) == ("vllm/10.0.0.1:8000", "vllm", "meta-llama/Llama-3.1-8B-Instruct",
                                                         "10.0.0.1", "http://10.0.0.1:8000")
    assert (a.running, a.waiting, a.kv_cache_usage, a.generation_tok_s) == (12.0, 3.0, 0.5, 900.0)
    assert b.generation_tok_s is None  # NaN: a rate of nothing is "no data"
    assert b.url is None and b.prompt_tok_s is None and b.ttft.p99_s is None and b.ttft.source is None
    assert a.status == b.status == "up"
    assert a.source_names["itl_s"] == ITL


def test_dcgm_join_gives_gbs_as_dram_active_times_peak(two):
    a, b = two.instances
    assert [g.gpu for g in a.gpus] == ["0", "1"]
    assert a.gpus[0].device == "NVIDIA H100 SXM" and a.gpus[0].fb_used_mib == 70000.0 and a.gpus[1].fb_used_mib is None
    assert a.dram_gbs == pytest.approx(0.5 * 3350 + 0.25 * 3350)
    assert a.peak_gbs == 2 * 3350 and a.dram_pct_of_peak == pytest.approx(37.5)
    assert b.gpus == () and b.dram_gbs is None and b.dram_pct_of_peak is None
    mystery = [g for g in two.gpus if g.host == "10.0.0.9"][0]  # no preset: its fraction stays, no GB/s
    assert mystery.device is None and mystery.sm_active == 0.3 and mystery.dram_gbs is None


def test_decode_share_of_the_ceiling_uses_the_host_gpus_and_the_model(two):
    a, b = two.instances
    # Llama-3.1-8B at 16 bit reads 16 GB a token; two H100s: 6,700 GB/s → 418.75 tok/s a stream at most.
    assert a.ceiling.decode_ceiling_tok_s == pytest.approx(6700 / 16)
    assert a.decode_pct_of_ceiling == pytest.approx(100 * (1 / 0.04) / (6700 / 16))
    assert b.ceiling is None and b.decode_pct_of_ceiling is None  # no GPU seen on its host


def test_bucket_edges_are_flagged_as_the_single_server_view_does(two):
    a, b = two.instances
    assert b.itl.edges == {"p50": "first"} and b.itl.first_le == 0.01  # 90 % in the first bucket
    assert "p99" not in b.itl.edges  # rank 99 of 100 sits in the second bucket
    assert a.itl.edges == {} and a.itl.last_le == 0.1


def test_merged_percentile_is_the_quantile_of_summed_buckets_not_an_average(two):
    merged = two.merged["itl"].p99_s
    summed = tuple((le, a + b) for le, a, b in zip(LES, (0, 10, 50, 100, 100), (90, 100, 100, 100, 100)))
    assert merged == pytest.approx(histogram_quantile(0.99, summed))
    assert merged != pytest.approx((0.09 + 0.02) / 2)
    assert merged_latency(two.instances[:1], "itl").p99_s == pytest.approx(histogram_quantile(0.99, tuple(zip(LES, (0, 10, 50, 100, 100)))))
    assert two.merged["itl"].edges == {}  # the summed buckets put neither quantile on an edge
    assert merged_latency(two.instances[1:], "itl").edges == {"p50": "first"}  # b alone: as its own row says


def test_callouts_name_the_saturated_and_the_slowest(two):
    assert two.saturated == ("vllm/10.0.0.1:8000",)  # waiting 3
    assert two.slowest == "vllm/10.0.0.1:8000"


def test_slowest_is_not_named_from_bounds_or_ties():
    found = {d.key: d for d in (instance("h:1"), instance("h:2"))}
    tied = {Want("p99", "itl_s", ITL): [(labels("h:1"), 0.0099), (labels("h:2"), 0.0099)],
            Want("max", "up", "up"): [(labels("h:1"), 1.0), (labels("h:2"), 1.0)]}
    assert read_fleet_results(0, found, tied).slowest is None
    pinned = {**tied, Want("p99", "itl_s", ITL): [(labels("h:1"), 0.0099), (labels("h:2"), 0.005)],
              Want("buckets", "itl_s", ITL): buckets("h:1", (100, 100, 100, 100, 100))}
    assert read_fleet_results(0, found, pinned).slowest is None  # "≤ 10 ms" against 5 ms tells nothing


def test_kv_at_the_threshold_is_saturated_and_a_down_instance_is_not():
    found = {d.key: d for d in (instance("h:1"), instance("h:2"))}
    results = {Want("gauge", "kv_cache_usage", "vllm:kv_cache_usage_perc"): [(labels("h:1"), SATURATED_KV_USAGE), (labels("h:2"), 0.99)],
               Want("max", "up", "up"): [(labels("h:1"), 1.0), (labels("h:2"), 0.0)]}
    fleet = read_fleet_results(0, found, results)
    assert fleet.saturated == ("vllm/h:1",)
    assert [r.status for r in fleet.instances] == ["up", "down"]


def test_status_restarted_unknown_and_down():
    found = {d.key: d for d in (instance("h:1"), instance("h:2"), instance("h:3"))}
    results = {Want("max", "up", "up"): [(labels("h:1"), 1.0), (labels("h:2"), 0.0)],
               Want("changes", "started", "process_start_time_seconds"): [(labels("h:1"), 2.0), (labels("h:2"), 1.0)]}
    rows = read_fleet_results(0, found, results).instances
    assert [(r.status, r.restarts) for r in rows] == [("restarted", 2), ("down", 1), ("unknown", None)]


def test_pools_from_a_kv_connector_or_a_role_label():
    names = VLLM | {"vllm:prompt_tokens_total"}
    found = {d.key: d for d in (instance("p:1", names=names, role="prefill"), instance("d:1", names=names, role="decode"),
                                instance("d:2", names=names, role="decode"))}
    results = {
        Want("rate", "kv_transfer", "vllm:prompt_tokens_by_source_total"): [(labels("p:1"), 0.0), (labels("d:1"), 400.0), (labels("d:2"), 100.0)],
        Want("gauge", "running", "vllm:num_requests_running"): [(labels("p:1"), 2.0), (labels("d:1"), 30.0), (labels("d:2"), 10.0)],
        Want("rate", "prompt_tokens_total", "vllm:prompt_tokens_total"): [(labels("p:1"), 5000.0)],
        Want("buckets", "itl_s", ITL): buckets("d:1", (0, 0, 10, 10, 10)) + buckets("d:2", (10, 10, 10, 10, 10)),
    }
    by_connector = read_fleet_results(0, found, results)
    assert [(r.key, r.role) for r in by_connector.instances] == [("vllm/d:1", "decode"), ("vllm/d:2", "decode"), ("vllm/p:1", None)]
    assert [p.role for p in by_connector.pools] == ["decode"] and by_connector.kv_transfer_tok_s == 500.0
    by_label = read_fleet_results(0, found, results, role_label="role")
    prefill, decode = by_label.pools
    assert (prefill.role, prefill.instances, prefill.running, prefill.prompt_tok_s) == ("prefill", ("vllm/p:1",), 2.0, 5000.0)
    assert (decode.role, decode.running) == ("decode", 40.0)
    summed = tuple(zip(LES, (10, 10, 20, 20, 20)))
    assert decode.itl.p99_s == pytest.approx(histogram_quantile(0.99, summed))


def test_no_data_at_all_is_rows_of_none_not_a_crash():
    found = {d.key: d for d in (instance("h:1", names=frozenset({"sglang:num_running_reqs"})),)}
    fleet = read_fleet_results(0, found, {})
    row = fleet.instances[0]
    assert row.engine == "sglang" and row.running is None and row.status == "unknown" and row.gpus == ()
    assert fleet.merged["ttft"].p99_s is None and fleet.merged["itl"].p50_s is None
    assert fleet.to_json()["instances"][0]["running"] is None


def test_join_rules_are_configurable():
    found = {d.key: d for d in (instance("10.0.0.1:8000", node="gpu-a"),)}
    results = {Want("dcgm", "dram_active", "DCGM_FI_PROF_DRAM_ACTIVE"): [(({"node": "gpu-a", "gpu": "0", "modelName": "NVIDIA H200"}), 0.5)]}
    default = read_fleet_results(0, found, results).instances[0]
    assert default.gpus == ()  # DCGM's Hostname is absent; the instance's host is 10.0.0.1
    joined = read_fleet_results(0, found, results, rules=JoinRules(dcgm_host_label="node", instance_label="node")).instances[0]
    assert joined.host == "gpu-a" and joined.dram_gbs == pytest.approx(0.5 * 4800)


@pytest.mark.parametrize(("address", "host"), [("10.0.0.5:8000", "10.0.0.5"), ("[::1]:8000", "::1"), ("gpu-node-3", "gpu-node-3"),
                                               ("node:metrics", "node:metrics")])
def test_host_part(address, host):
    assert host_part(address) == host


def test_sort_rows_numbers_first_largest_none_last(two):
    assert [r.key for r in sort_rows(two.instances, "gen")] == ["vllm/10.0.0.1:8000", "vllm/10.0.0.2:8000"]
    assert [r.key for r in sort_rows(two.instances, "itl")] == ["vllm/10.0.0.1:8000", "vllm/10.0.0.2:8000"]
    assert [r.key for r in sort_rows(reversed(two.instances), "instance")] == ["vllm/10.0.0.1:8000", "vllm/10.0.0.2:8000"]
    assert [r.key for r in sort_rows(two.instances, "dram")][-1] == "vllm/10.0.0.2:8000"
