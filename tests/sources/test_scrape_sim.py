"""Scraping the embedded simulator's vLLM V1 /metrics while it serves real requests."""

from __future__ import annotations

import asyncio

import pytest

from tui.core.telemetry.promstats import cached_prompt_tokens
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sources.http import make_client
from tui.sources.scrape import MetricsScraper


@pytest.fixture(scope="module")
def live_sim():
    with SimulatorProcess.start(["--max-model-len", "4096"]) as sim:
        yield sim


async def test_live_simulator_counts_the_requests_it_served(live_sim):
    async with make_client(live_sim.url) as client:
        model = (await client.get("/v1/models")).json()["data"][0]["id"]
        scraper = MetricsScraper(client)
        before = await scraper.read()
        answers = await asyncio.gather(*(
            client.post("/v1/completions", json={"model": model, "prompt": f"{i} tell me", "max_tokens": 12})
            for i in range(3)
        ))
        after = await scraper.read()
    generated = sum(a.json()["usage"]["completion_tokens"] for a in answers)
    prompted = sum(a.json()["usage"]["prompt_tokens"] for a in answers)
    assert before.engine == after.engine == "vllm"
    assert after.generation_tokens_total - before.generation_tokens_total == generated
    assert after.prompt_tokens_total - before.prompt_tokens_total == prompted
    assert after.generation_tok_s == pytest.approx(generated / after.window_s)
    ttft = after.histograms["ttft_s"]
    assert ttft.n == 3 and ttft.p50 is not None and 0 < ttft.p50 < 5
    assert after.histograms["e2e_s"].n == 3
    assert after.engine_config["max_model_len"] == "4096"
    assert "block_size" in after.engine_config
    assert after.kv_cache_usage is not None and 0 <= after.kv_cache_usage <= 1
    assert after.restart is None


async def test_cached_prompt_tokens_between_scrapes_match_the_usage_of_a_repeated_prompt():
    """The simulator as it is: around one request alone, the counters' cached tokens are that request's."""
    prompt = " ".join(f"word{i}" for i in range(400))
    with SimulatorProcess.start(["--enable-prompt-tokens-details"]) as sim:
        async with make_client(sim.url) as client:
            model = (await client.get("/v1/models")).json()["data"][0]["id"]
            body = {"model": model, "prompt": prompt, "max_tokens": 2}
            await client.post("/v1/completions", json=body)  # fills the prefix cache
            scraper = MetricsScraper(client)
            await scraper.read()
            before = scraper.last_reading
            usage = (await client.post("/v1/completions", json=body)).json()["usage"]
            snap = await scraper.read()
            after = scraper.last_reading
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    assert cached > 0
    assert cached_prompt_tokens(before, after) == cached
    assert snap.prompt_tokens_cached_total is not None
    assert snap.source_names["prefix_cache_hit_rate"].startswith('vllm:prompt_tokens_by_source_total{source="local_cache_hit"} / ')
    assert snap.prefix_cache_hit_rate == pytest.approx(cached / usage["prompt_tokens"])
