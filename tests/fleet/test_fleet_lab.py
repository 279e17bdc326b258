"""`phasetop fleet` against a real Prometheus scraping three simulators and two DCGM stand-ins (the fleet lab).

The lab starts once for the module. Its Prometheus scrapes every second, so a figure read through it may lag the
simulator's own /metrics by one scrape: the tests compare after the load has ended, or wait on a deadline.
The restart and the kill come last: they change the lab for whatever runs after them.
"""

import asyncio
import json
import threading
import time

import httpx
import pytest

from tests.hostile import phasetop
from tui.core.fleet.instances import Fleet
from tui.core.telemetry.metric_names import parse_exposition
from tui.core.fleet.promql import max_query, quantile_query
from tui.core.telemetry.promstats import histogram_quantile, quantile_edge
from tui.fleet_lab import GPUS, FleetLab
from tui.sources.http import make_client
from tui.sources.prometheus import label_values, query, query_range, read_fleet

DEADLINE_S = 20.0


def _model(url: str) -> str:
    return httpx.get(f"{url}/v1/models", timeout=10).json()["data"][0]["id"]


def _complete(url: str, prompt_words: int, max_tokens: int) -> None:
    body = {"model": _model(url), "prompt": "tell me about the roofline " * prompt_words, "max_tokens": max_tokens}
    httpx.post(f"{url}/v1/completions", json=body, timeout=60).raise_for_status()


@pytest.fixture(scope="module")
def loaded(lab):
    """Requests of different sizes on each simulator, then two scrapes' wait, so rates and histograms hold them."""
    for i, sim in enumerate(lab.sims):
        for n in range(2 + i):
            _complete(sim.url, 20 + 150 * n, 16 + 8 * i)
    time.sleep(2.5)
    return lab


def read(lab: FleetLab, **kwargs) -> Fleet:
    async def go() -> Fleet:
        async with make_client(lab.prometheus_url) as client:
            return await read_fleet(client, **kwargs)

    return asyncio.run(go())


def fleet_json(tmp_path, lab: FleetLab, *args: str) -> dict:
    done = phasetop(tmp_path, "fleet", "--prometheus", lab.prometheus_url, "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def own_metrics(url: str) -> dict:
    return parse_exposition(httpx.get(f"{url}/metrics", timeout=10).text)


def test_fleet_json_lists_the_three_instances_with_each_simulators_own_figures(tmp_path, loaded):
    document = fleet_json(tmp_path, loaded)
    rows = {row["instance"]: row for row in document["instances"]}
    assert sorted(rows) == sorted(s.url.removeprefix("http://") for s in loaded.sims)
    for sim in loaded.sims:
        row = rows[sim.url.removeprefix("http://")]
        own = own_metrics(sim.url)
        assert (row["engine"], row["status"], row["url"]) == ("vllm", "up", sim.url)
        assert row["model"] == own["vllm:num_requests_running"][0][0]["model_name"]
        assert row["generation_tokens_total"] == sum(v for _, v in own["vllm:generation_tokens"])
        assert row["started_unix"] == pytest.approx(own["process_start_time_seconds"][0][1])
        assert (row["running"], row["waiting"]) == (0, 0)
        assert row["kv_cache_usage"] == pytest.approx(sum(v for _, v in own["vllm:kv_cache_usage_perc"]))
        # Every observation lies inside the 1m window and the buckets all began at 0 in it, so the rates'
        # quantile is the quantile of the simulator's own cumulative buckets.
        ttft = sorted((float(labels["le"]), v) for labels, v in own["vllm:time_to_first_token_seconds_bucket"])
        assert row["ttft"]["p99_s"] == pytest.approx(histogram_quantile(0.99, ttft), rel=1e-6)
        assert row["ttft"]["edges"].get("p99") == quantile_edge(0.99, tuple(ttft))
        assert row["generation_tok_s"] > 0 and row["prompt_tok_s"] > 0
        assert row["ttft"]["source"] == "vllm:time_to_first_token_seconds"


def test_a_stream_in_flight_shows_as_running_on_its_instance_only(loaded):
    sim = loaded.sims[0]
    body = {"model": _model(sim.url), "prompt": "a long answer", "max_tokens": 1500}  # about 7 s at 209 tok/s
    stream = threading.Thread(target=lambda: httpx.post(f"{sim.url}/v1/completions", json=body, timeout=60))
    stream.start()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            rows = {r.url: r for r in read(loaded).instances}
            if rows[sim.url].running == 1 or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        own = own_metrics(sim.url)["vllm:num_requests_running"][0][1]
        assert (rows[sim.url].running, own) == (1, 1)
        assert [rows[s.url].running for s in loaded.sims[1:]] == [0, 0]
        assert rows[sim.url].generation_tok_s > 0
    finally:
        stream.join()


def test_dcgm_join_gives_dram_active_times_the_peak(loaded):
    rows = {r.host: r for r in read(loaded).instances}
    for host in GPUS:
        row = rows[host.host]
        assert [g.dram_active for g in row.gpus] == [host.dram_active] * host.count
        assert row.dram_gbs == pytest.approx(host.dram_active * 3350 * host.count)  # H100 SXM's 3,350 GB/s each
        assert row.dram_pct_of_peak == pytest.approx(host.dram_active * 100)
        assert row.gpus[0].fb_used_mib == 60000 and row.gpus[0].device == "NVIDIA H100 SXM"
    assert rows["127.0.0.4"].gpus == () and rows["127.0.0.4"].dram_gbs is None  # no DCGM on that host: no data
    loaded.exporters[0].set(dram_active=0.9)
    deadline = time.monotonic() + DEADLINE_S
    while (gbs := {r.host: r for r in read(loaded).instances}["127.0.0.2"].dram_gbs) != pytest.approx(0.9 * 3350):
        assert time.monotonic() < deadline, f"DRAM GB/s stayed {gbs}"
        time.sleep(0.3)


def test_decode_share_of_the_simulated_ceiling(loaded):
    for row in read(loaded).instances:
        # The simulator decodes at its roofline ceiling; mean ITL then gives close to 100 % of it.
        assert row.ceiling is not None and row.ceiling.decode_ceiling_tok_s > 0
        assert 80 <= row.decode_pct_of_ceiling <= 105, (row.key, row.decode_pct_of_ceiling)


def test_merged_p99_matches_prometheus_own_merged_quantile(loaded):
    fleet = read(loaded)

    async def merged() -> float:
        async with make_client(loaded.prometheus_url) as client:
            answer = await query(client, quantile_query(0.99, "vllm:time_to_first_token_seconds", by=()), fleet.t_unix)
        return answer[0][1]

    assert fleet.merged["ttft"].p99_s == pytest.approx(asyncio.run(merged()), rel=1e-9)


def test_range_queries_and_label_values_for_a_screen(loaded):
    async def go():
        async with make_client(loaded.prometheus_url) as client:
            now = time.time()
            return (await query_range(client, max_query("up"), now - 5, now, 1.0), await label_values(client, "job"))

    ranges, jobs = asyncio.run(go())
    assert len(ranges) == 5 and all(len(points) >= 5 and points[-1][1] == 1.0 for _, points in ranges)
    assert jobs == ["dcgm", "vllm"]


def test_role_label_pools_and_label_filter(tmp_path, loaded):
    document = fleet_json(tmp_path, loaded, "--role-label", "role")
    pools = {p["role"]: p for p in document["pools"]}
    assert [p["role"] for p in document["pools"]] == ["prefill", "decode"]
    assert pools["prefill"]["instances"] == [f"vllm/{loaded.sims[0].url.removeprefix('http://')}"]
    assert pools["decode"]["generation_tok_s"] > 0
    decode_only = fleet_json(tmp_path, loaded, "--label-filter", "role=decode")
    assert [r["instance"] for r in decode_only["instances"]] == [loaded.sims[1].url.removeprefix("http://")]


def test_a_filter_value_with_quotes_and_newlines_is_one_escaped_string(tmp_path, loaded):
    document = fleet_json(tmp_path, loaded, "--label-filter", 'role=de"code\n} or up{x="')
    assert document["instances"] == []  # a query Prometheus parsed, that matched nothing


def test_table_for_people(tmp_path, loaded):
    done = phasetop(tmp_path, "fleet", "--prometheus", loaded.prometheus_url, "--sort", "gen")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:3] == ["instance", "engine", "model"]
    assert sum(1 for line in lines if line.startswith("vllm/127.0.0.")) == 3
    assert "2,010 (60%)" in done.stdout or "3,015 (90%)" in done.stdout  # 127.0.0.2's DRAM GB/s (before or after .set)
    assert "fleet: TTFT p99" in done.stdout


def test_a_restart_with_new_flags_shows_as_restarted(loaded):
    before = {r.url: r for r in read(loaded).instances}[loaded.sims[1].url]
    loaded.restart_sim(1, ("--max-num-batched-tokens", "1024"))
    url = loaded.sims[1].url
    deadline = time.monotonic() + DEADLINE_S
    while (row := {r.url: r for r in read(loaded).instances}[url]).status != "restarted":
        assert time.monotonic() < deadline, f"status stayed {row.status}"
        time.sleep(0.3)
    assert row.restarts == 1 and row.started_unix > before.started_unix
    assert row.started_unix == pytest.approx(own_metrics(url)["process_start_time_seconds"][0][1])


def test_a_killed_instance_shows_as_down(tmp_path, loaded):
    gone = loaded.sims[2].url
    loaded.kill_sim(2)
    deadline = time.monotonic() + DEADLINE_S
    while (row := {r.url: r for r in read(loaded).instances}[gone]).status != "down":
        assert time.monotonic() < deadline, f"status stayed {row.status}"
        time.sleep(0.3)
    assert not row.up and "connection refused" in row.last_error
    done = phasetop(tmp_path, "fleet", "--prometheus", loaded.prometheus_url)
    assert done.returncode == 0
    assert f"{row.key} down: " in done.stdout
