"""Scraping the embedded simulator's vLLM V1 /metrics while it serves real requests."""

from __future__ import annotations

import asyncio

import pytest

from tui.sim.launcher import SimulatorProcess
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
