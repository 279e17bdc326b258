"""Scraping /metrics from a loopback server whose counters and buckets advance by known amounts."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.fixtures.metrics_server import MetricsServer, bump, fixture, observe, set_value, vllm_models
from tui.core.telemetry.promstats import cached_prompt_tokens
from tui.core.telemetry.readings import MetricsSnapshot
from tui.sources.errors import ProtocolError, ServerUnavailable
from tui.sources.http import make_client
from tui.sources.scrape import MetricsNotExposed, MetricsScraper

E0 = 'engine="0",model_name="m"'
E1 = 'engine="1",model_name="m"'


def advanced_vllm(text: str) -> str:
    """+1200 prompt and +300 generated tokens, 1 preemption, 400 prefix queries with 100 hits,
    and ten TTFTs: 5 × 0.15 s, 4 × 0.3 s, 1 × 3.0 s (split over the two engines)."""
    text = bump(text, {
        f"vllm:prompt_tokens_total{{{E0}}}": 1000, f"vllm:prompt_tokens_total{{{E1}}}": 200,
        f"vllm:generation_tokens_total{{{E0}}}": 100, f"vllm:generation_tokens_total{{{E1}}}": 200,
        f"vllm:num_preemptions_total{{{E1}}}": 1,
        f"vllm:prefix_cache_queries_total{{{E0}}}": 400, f"vllm:prefix_cache_hits_total{{{E0}}}": 100,
    })
    text = observe(text, "vllm:time_to_first_token_seconds", [0.15] * 5 + [0.3], E0)
    text = observe(text, "vllm:time_to_first_token_seconds", [0.3] * 3 + [3.0], E1)
    return observe(text, "vllm:request_prefill_time_seconds", [0.05] * 4, E0)  # under the 0.3 s first bucket


async def test_windowed_rates_and_quantiles_from_two_scrapes():
    base = fixture("vllm-0.33.txt")
    with MetricsServer([base, advanced_vllm(base)], models=vllm_models(16384)) as server:
        async with make_client(server.url) as client:
            scraper = MetricsScraper(client)
            first = await scraper.read()
            second = await scraper.read()
    assert first.window_s is None and first.prompt_tok_s is None
    w = second.window_s
    assert w and w > 0
    assert second.prompt_tok_s == pytest.approx(1200 / w)
    assert second.generation_tok_s == pytest.approx(300 / w)
    assert second.preemptions_per_s == pytest.approx(1 / w)
    assert second.prefix_cache_hit_rate == pytest.approx(0.25)
    assert second.prefix_cache_hit_rate_total == pytest.approx(600 / 2400)
    ttft = second.histograms["ttft_s"]
    assert ttft.n == 10 and ttft.n_total == 15
    assert ttft.p50 == pytest.approx(0.25)  # rank 5 fills (0.1, 0.25] exactly
    assert ttft.p90 == pytest.approx(0.5)  # rank 9: top of (0.25, 0.5]
    assert ttft.p99 == pytest.approx(2.5 + 2.5 * 0.9)  # rank 9.9 in (2.5, 5.0]
    assert ttft.edges == {}
    prefill = second.histograms["prefill_s"]
    assert prefill.n == 4 and prefill.edges == {"p50": "first", "p90": "first", "p99": "first"}
    assert prefill.first_le == 0.3
    assert second.histograms["itl_s"].n == 0 and second.histograms["itl_s"].p50 is None
    assert second.engine_config["max_model_len"] == "16384"
    assert second.engine_config["kv_cache_size_tokens"] == "432000"
    assert second.restart is None


async def test_counter_reset_mid_run_is_a_restart_with_old_and_new_config():
    base = fixture("vllm-0.33.txt")
    grown = bump(base, {f"vllm:generation_tokens_total{{{E0}}}": 500})
    restarted = bump(base, {f"vllm:generation_tokens_total{{{E0}}}": -880, f"vllm:generation_tokens_total{{{E1}}}": -600})
    restarted = restarted.replace('num_gpu_blocks="27000"', 'num_gpu_blocks="13500"').replace(
        'gpu_memory_utilization="0.92"', 'gpu_memory_utilization="0.5"')
    after = bump(restarted, {f"vllm:generation_tokens_total{{{E0}}}": 40})
    with MetricsServer([base, grown, restarted, after], models=vllm_models(8192)) as server:
        async with make_client(server.url) as client:
            scraper = MetricsScraper(client)
            snaps = [await scraper.read() for _ in range(4)]
    assert snaps[1].generation_tok_s > 0 and snaps[1].restart is None
    restart = snaps[2].restart
    assert restart is not None
    assert restart.reasons[0].startswith("counters reset")
    assert "cache_config_info changed" in restart.reasons
    assert restart.config_changes == {"gpu_memory_utilization": ("0.92", "0.5"), "num_gpu_blocks": ("27000", "13500")}
    assert snaps[2].generation_tokens_total == 20  # counted from zero: 20 tokens since
    # Its start time is the old one, so the new process's time base is unknown: no rate rather than 20 / gap.
    assert snaps[2].window_s is None and snaps[2].generation_tok_s is None
    assert snaps[3].restart is None
    assert snaps[3].generation_tok_s == pytest.approx(40 / snaps[3].window_s)
    assert server.models_requests == 2  # read at start and again after the restart


def restarted_past_the_old_totals(text: str, start_unix: float) -> str:
    """A new process that started at start_unix and has already outgrown the old one's totals:
    8000 → 10000 prompt, 1500 → 2000 generated tokens; its TTFTs are the old 5 plus 10 at 3.0 s."""
    text = bump(text, {f"vllm:prompt_tokens_total{{{E0}}}": 2000, f"vllm:generation_tokens_total{{{E1}}}": 500})
    text = observe(text, "vllm:time_to_first_token_seconds", [3.0] * 10, E0)
    return set_value(text, "process_start_time_seconds", start_unix)


async def test_restart_past_the_old_totals_counts_from_the_new_process_start():
    """Only process_start_time tells: every counter and bucket is higher than the old process's."""
    base = fixture("vllm-0.33.txt")
    with MetricsServer([base], models=vllm_models(16384)) as server:
        async with make_client(server.url) as client:
            scraper = MetricsScraper(client)
            first = await scraper.read()
            await asyncio.sleep(0.3)
            start = time.time()  # the new process starts well inside the window
            server.bodies.append(restarted_past_the_old_totals(base, start))
            await asyncio.sleep(0.2)
            snap = await scraper.read()
            server.bodies.append(bump(server.bodies[-1], {f"vllm:generation_tokens_total{{{E0}}}": 60}))
            after = await scraper.read()
    assert snap.restart is not None and snap.restart.reasons == ("process_start_time_seconds changed",)
    alive_s = snap.t_unix - start
    assert snap.window_s == pytest.approx(alive_s)  # the window is the new process's life, not the scrape gap
    assert snap.window_s < snap.t_unix - first.t_unix - 0.25
    assert snap.prompt_tok_s == pytest.approx(10000 / alive_s)  # its whole total, not 10000 − 8000
    assert snap.generation_tok_s == pytest.approx(2000 / alive_s)
    assert snap.prefix_cache_hit_rate == pytest.approx(500 / 2000)  # its own hits / queries
    ttft = snap.histograms["ttft_s"]
    assert ttft.n == ttft.n_total == 15  # all of the new process's buckets, none subtracted
    assert ttft.p50 == pytest.approx(2.5 + 2.5 * (2.5 / 10))  # rank 7.5: 5 fast ones, then 10 in (2.5, 5.0]
    assert ttft.mean == pytest.approx((1.18 + 30) / 15)
    assert after.restart is None
    assert after.generation_tok_s == pytest.approx(60 / after.window_s)  # then windows between its own scrapes


async def test_restart_without_a_usable_start_time_has_unknown_rates_for_one_window():
    """llama.cpp has no process_start_time: the new process's time base is unknown, so no rate is made up."""
    base = fixture("llamacpp.txt")
    restarted = bump(base, {"llamacpp:prompt_tokens_total": -1400, "llamacpp:tokens_predicted_total": -600})
    with MetricsServer([base, restarted, bump(restarted, {"llamacpp:tokens_predicted_total": 30})]) as server:
        async with make_client(server.url) as client:
            scraper = MetricsScraper(client)
            snaps = [await scraper.read() for _ in range(3)]
    restart = snaps[1]
    assert restart.restart is not None and restart.restart.reasons[0].startswith("counters reset")
    assert restart.window_s is None  # "since start", as on a first scrape
    assert restart.prompt_tok_s is None and restart.generation_tok_s is None
    assert restart.prompt_tokens_total == 100 and restart.generation_tokens_total == 40
    assert snaps[2].restart is None and snaps[2].generation_tok_s == pytest.approx(30 / snaps[2].window_s)


async def test_process_start_change_alone_is_a_restart():
    base = fixture("vllm-0.10.txt")
    later = set_value(bump(base, {'vllm:prompt_tokens_total{model_name="m"}': 5000}), "process_start_time_seconds", 1.8e9)
    with MetricsServer([base, later]) as server:
        async with make_client(server.url) as client:
            scraper = MetricsScraper(client)
            await scraper.read()
            snap = await scraper.read()
    assert snap.restart is not None and snap.restart.reasons == ("process_start_time_seconds changed",)
    assert "max_model_len" not in snap.engine_config  # no /v1/models here: nothing invented


async def _read_across_forget(url: str) -> tuple[MetricsSnapshot, MetricsSnapshot]:
    """A first read; a second read with `forget` called 0.2 s into it (phasetop restarted the server); a third."""
    async with make_client(url) as client:
        scraper = MetricsScraper(client)
        await scraper.read()
        on_its_way = asyncio.create_task(scraper.read())
        await asyncio.sleep(0.2)
        scraper.forget()
        return await on_its_way, await scraper.read()


async def test_a_page_read_across_a_restart_phasetop_made_is_not_taken_for_a_second_restart():
    """`forget` (phasetop restarted the server) while a scrape of the old process is on its way: that page is not the
    new process's first reading, so the next scrape finds no restart (a second session, whose identity the UI's
    next identify then cut short)."""
    old = fixture("vllm-0.10.txt")
    new = set_value(old, "process_start_time_seconds", 1.8e9)
    with MetricsServer([old, old, new], delays_s=[0.0, 0.5]) as server:
        across, after = await _read_across_forget(server.url)
    assert across.restart is None and after.restart is None
    assert server.metrics_requests == 4, "the page read across the restart was read again"


async def test_a_restart_found_while_phasetop_restarted_the_server_is_read_again_not_counted_twice():
    """The new process's page read, its restart found, and `forget` called while the new config is on its way: the
    read starts again from nothing (that restart is the one phasetop made), and says no restart."""
    old = fixture("vllm-0.10.txt")
    new = set_value(old, "process_start_time_seconds", 1.8e9)
    with MetricsServer([old, new], models=vllm_models(), models_delays_s=[0.0, 0.5]) as server:
        across, after = await _read_across_forget(server.url)
    assert across.restart is None and after.restart is None
    assert across.engine_config["max_model_len"] == "8192"


async def test_vllm_old_names_windowed_itl():
    base = fixture("vllm-0.10.txt")
    later = observe(base, "vllm:time_per_output_token_seconds", [0.02] * 9 + [0.09], 'model_name="m"')
    later = bump(later, {'vllm:gpu_prefix_cache_queries_total{model_name="m"}': 200,
                         'vllm:gpu_prefix_cache_hits_total{model_name="m"}': 150})
    with MetricsServer([base, later]) as server:
        async with make_client(server.url) as client:
            scraper = MetricsScraper(client)
            await scraper.read()
            snap = await scraper.read()
    itl = snap.histograms["itl_s"]
    assert itl.n == 10
    assert itl.p50 == pytest.approx(0.01 + 0.015 * (5 / 9))  # (0.01, 0.025] holds 9
    assert itl.p99 == pytest.approx(0.075 + 0.025 * 0.9)  # rank 9.9 in (0.075, 0.1]
    assert snap.kv_cache_usage == 0.75
    assert snap.prefix_cache_hit_rate == 0.75
    assert snap.source_names["itl_s"] == "vllm:time_per_output_token_seconds"


async def test_sglang_and_llamacpp_rates():
    for name, key, tokens in (
        ("sglang-0.5.txt", 'sglang:generation_tokens_total{engine_type="unified",model_name="m"}', 90),
        ("llamacpp.txt", "llamacpp:tokens_predicted_total", 64),
    ):
        base = fixture(name)
        with MetricsServer([base, bump(base, {key: tokens})]) as server:
            async with make_client(server.url) as client:
                scraper = MetricsScraper(client)
                await scraper.read()
                snap = await scraper.read()
        assert snap.generation_tok_s == pytest.approx(tokens / snap.window_s), name
        assert snap.prompt_tok_s == 0.0, name


async def test_window_spans_several_scrapes():
    base = fixture("llamacpp.txt")
    bodies = [base]
    for _ in range(3):
        bodies.append(bump(bodies[-1], {"llamacpp:prompt_tokens_total": 100}))
    with MetricsServer(bodies) as server:
        async with make_client(server.url) as client:
            scraper = MetricsScraper(client, window_s=60.0)
            snaps = [await scraper.read() for _ in range(4)]
    last = snaps[-1]
    assert last.prompt_tok_s == pytest.approx(300 / last.window_s)  # against the first reading
    assert last.window_s > snaps[1].window_s


async def test_no_metrics_endpoint_is_named():
    with MetricsServer(["x"], metrics_status=404) as server:
        async with make_client(server.url) as client:
            with pytest.raises(MetricsNotExposed, match="llama.cpp with --metrics"):
                await MetricsScraper(client).read()


async def test_not_prometheus_text_is_a_protocol_error():
    with MetricsServer(["<<not prometheus>>\n"]) as server:
        async with make_client(server.url) as client:
            with pytest.raises(ProtocolError, match="not Prometheus text"):
                await MetricsScraper(client).read()


async def test_unreachable_server():
    with MetricsServer(["x"]) as server:
        url = server.url
    async with make_client(url, timeout_s=2.0) as client:
        with pytest.raises(ServerUnavailable, match="cannot connect"):
            await MetricsScraper(client).read()


VLLM_032 = 'engine="0",model_name="tiny"'
CONTENT_TYPE_1_0 = "text/plain; version=1.0.0; charset=utf-8"


async def test_vllm_032_wire_windowed_cache_hits_estimated_reads_and_waiting_reasons():
    """vLLM 0.32's text as its exporter writes it, served with its content type; two scrapes 0.2 s apart."""
    base = fixture("vllm-0.32.txt")
    later = bump(base, {
        f"vllm:prompt_tokens_total{{{VLLM_032}}}": 2000,
        f'vllm:prompt_tokens_by_source_total{{{VLLM_032},source="local_compute"}}': 500,
        f'vllm:prompt_tokens_by_source_total{{{VLLM_032},source="local_cache_hit"}}': 1500,
        f"vllm:prompt_tokens_cached_total{{{VLLM_032}}}": 1500,
        f"vllm:prefix_cache_queries_total{{{VLLM_032}}}": 2000,
        f"vllm:prefix_cache_hits_total{{{VLLM_032}}}": 1500,
        f"vllm:estimated_read_bytes_per_gpu_total{{{VLLM_032}}}": 6.0e10,
    })
    later = observe(later, "vllm:time_to_first_token_seconds", [0.03] * 4, VLLM_032)  # le sits between the two
    with MetricsServer([base, later], models=vllm_models(4096), content_type=CONTENT_TYPE_1_0) as server:
        async with make_client(server.url) as client:
            scraper = MetricsScraper(client)
            first = await scraper.read()
            before = scraper.last_reading
            await asyncio.sleep(0.2)
            second = await scraper.read()
            after = scraper.last_reading
    assert first.engine == second.engine == "vllm"
    w = second.window_s
    assert w and w >= 0.2
    # The prefix cache's own hits (local_cache_hit), not prompt_tokens_cached's "local + external": a KV transfer
    # is no cache hit.
    assert first.prefix_cache_hit_rate is None and first.prefix_cache_hit_rate_total == pytest.approx(4800 / 12000)
    assert second.prefix_cache_hit_rate == pytest.approx(1500 / 2000)
    assert second.source_names["prefix_cache_hit_rate"] == (
        'vllm:prompt_tokens_by_source_total{source="local_cache_hit"} / vllm:prompt_tokens_by_source_total')
    assert second.prompt_tokens_cached_total == 6300
    assert second.prompt_tokens_by_source == {"local_compute": 7500, "local_cache_hit": 6300, "external_kv_transfer": 200}
    assert second.est_read_gbs == pytest.approx(60 / w)
    assert second.source_names["est_read_gbs"] == "vllm:estimated_read_bytes_per_gpu_total"
    assert first.est_read_gbs is None  # no window yet
    assert second.waiting == 5 and second.waiting_capacity == 4 and second.waiting_deferred == 1
    assert second.saturated  # 4 wait for capacity with the pool 97 % full
    assert second.kv_cache_size_tokens == 32768 and second.kv_cache_used_tokens == pytest.approx(0.97 * 32768)
    ttft = second.histograms["ttft_s"]
    assert ttft.n == 4 and ttft.n_total == 16 and ttft.p50 == pytest.approx(0.02 + 0.02 * 0.5)
    assert second.generation_tok_s == 0  # `_created` samples are not counters
    assert second.restart is None
    assert cached_prompt_tokens(before, after) == 1500


async def test_deferred_requests_alone_are_not_saturation():
    base = fixture("vllm-0.32.txt")
    deferred = set_value(set_value(base, f'vllm:num_requests_waiting_by_reason{{{VLLM_032},reason="capacity"}}', 0),
                         f'vllm:num_requests_waiting_by_reason{{{VLLM_032},reason="deferred"}}', 5)
    with MetricsServer([deferred], content_type=CONTENT_TYPE_1_0) as server:
        async with make_client(server.url) as client:
            snap = await MetricsScraper(client).read()
    assert snap.waiting == 5 and snap.kv_cache_usage == 0.97
    assert snap.waiting_capacity == 0 and snap.waiting_deferred == 5
    assert not snap.saturated  # they wait on something other than the pool


async def test_estimated_reads_stay_null_without_mfu_metrics():
    base = set_value(fixture("vllm-0.32.txt"), f"vllm:estimated_read_bytes_per_gpu_total{{{VLLM_032}}}", 0)
    with MetricsServer([base, bump(base, {f"vllm:generation_tokens_total{{{VLLM_032}}}": 10})],
                       content_type=CONTENT_TYPE_1_0) as server:
        async with make_client(server.url) as client:
            scraper = MetricsScraper(client)
            await scraper.read()
            snap = await scraper.read()
    assert snap.generation_tok_s > 0 and snap.est_read_gbs is None
    assert snap.to_json()["est_read_gbs"] is None
