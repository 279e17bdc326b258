"""`phasetop metrics`, `gpu` and `ceiling` on llama-server: live state, the server process, the real model size."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest

from tests.real.conftest import phasetop_json, probe
from tui.core.hardware.devices import find_device
from tui.sources.http import make_client
from tui.sources.workloads.prompts import prompt_of
from tui.sources.scrape import MetricsScraper
from tui.sources.stream import StreamRequest, measure

pytestmark = pytest.mark.real_engine

LONG_ANSWER_TOKENS = 300
"""Long enough (~15 s on one core) to be scraped and sampled mid-answer."""


def answer_in_background(url: str) -> threading.Thread:
    async def one() -> None:
        async with make_client(url, timeout_s=120) as client:
            prompt = await prompt_of(client, "llamacpp", "m", 50)
            timing = await measure(client, StreamRequest("llamacpp", "m", prompt.text, LONG_ANSWER_TOKENS))
            assert timing.ok, timing.error

    thread = threading.Thread(target=asyncio.run, args=(one(),), daemon=True)
    thread.start()
    return thread


def wait_until_busy(url: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(slot["is_processing"] for slot in httpx.get(f"{url}/slots", timeout=10).json()):
            return
        time.sleep(0.1)
    raise AssertionError(f"no slot started processing within {timeout_s:.0f} s")


def test_metrics_and_host_while_a_request_runs(llama, capsys):
    worker = answer_in_background(llama.url)
    try:
        wait_until_busy(llama.url)
        code, metrics, err = phasetop_json(capsys, "metrics", "--url", llama.url, "--interval", "1")
        assert code == 0, err
        assert metrics["engine"] == "llamacpp"
        assert metrics["running"] >= 1
        assert metrics["source_names"]["running"] == "llamacpp:requests_processing"
        slots = metrics["slots"]
        assert len(slots) == 4 and {s["id"] for s in slots} == {0, 1, 2, 3}
        busy = [s for s in slots if s["state"] == "processing"]
        assert len(busy) == 1 and busy[0]["n_ctx"] == 2048
        assert busy[0]["n_prompt_tokens_cache"] + busy[0]["n_prompt_tokens_processed"] == 50
        assert 0 < busy[0]["n_decoded"] < LONG_ANSWER_TOKENS, "the slot's count is live, mid-answer"

        code, gpu, err = phasetop_json(capsys, "gpu", "--url", llama.url, "--interval", "1")
        assert code == 0, err
        process = gpu["host"]["process"]
        assert process is not None, gpu["host"]["process_reason"]
        assert process["pid"] == llama.pid and process["name"] == "llama-server"
        assert process["rss_bytes"] > 200e6, "the model is mapped and resident"
        assert process["cpu_percent"] > 30, "one thread decoding (100 % on an idle core)"
    finally:
        worker.join(120)
    assert not worker.is_alive()


def test_rates_come_from_the_total_counters(llama):
    """llama.cpp adds a request's tokens to its counters when it ends: a window spanning one short request has them all."""

    async def window() -> tuple:
        # Two clients: llama-server may close a connection right after a streamed answer, so reusing it races.
        async with make_client(llama.url, timeout_s=120) as scraping, make_client(llama.url, timeout_s=120) as asking:
            scraper = MetricsScraper(scraping)
            await scraper.read()
            prompt = await prompt_of(asking, "llamacpp", "m", 30)
            timing = await measure(asking, StreamRequest("llamacpp", "m", prompt.text, 12))
            return timing, await scraper.read()

    timing, snapshot = asyncio.run(window())
    assert timing.ok and timing.output_tokens > 1  # 12, unless the model ended the text sooner
    assert snapshot.source_names["generation_tokens_total"] == "llamacpp:tokens_predicted_total"
    assert snapshot.source_names["prompt_tokens_total"] == "llamacpp:prompt_tokens_total"
    assert snapshot.generation_tok_s == pytest.approx(timing.output_tokens / snapshot.window_s)
    assert snapshot.prompt_tok_s == pytest.approx(30 / snapshot.window_s, rel=0.1)


def test_prompt_cache_hits_show_in_the_metrics(llama, capsys):
    text = " ".join(["old men talk about rain in the green hills"] * 40)
    probe(capsys, llama.url, "--prompt", text, "--max-tokens", "4", "--repeat", "2")
    code, metrics, err = phasetop_json(capsys, "metrics", "--url", llama.url, "--interval", "0.5")
    assert code == 0, err
    assert metrics["source_names"]["prefix_cache_hits_total"] == "llamacpp:prompt_tokens_cached_total"
    assert metrics["prefix_cache_hit_rate_total"] > 0.2, "the repeat's ~300 cached tokens against ~340 computed"


def test_the_ceiling_uses_the_cpu_row_and_the_served_model_size(llama, capsys):
    code, described, err = phasetop_json(capsys, "probe", "--url", llama.url, "--prompt-tokens", "10", "--max-tokens", "2")
    model_bytes = described["server"]["model_bytes"]
    code, ceiling, err = phasetop_json(capsys, "ceiling", "--url", llama.url, "--gpu", "cpu")
    assert code == 0, err
    cpu = find_device("cpu")
    assert ceiling["mem_bandwidth_gb_s"] == cpu.mem_bandwidth_gbs
    assert ceiling["weight_bytes"] == pytest.approx(model_bytes)
    assert ceiling["decode_ceiling_tok_s"] == pytest.approx(cpu.mem_bandwidth_gbs * 1e9 / model_bytes)
    code, flagged, err = phasetop_json(capsys, "ceiling", "--url", llama.url, "--bandwidth-gbs", "45")
    assert flagged["decode_ceiling_tok_s"] == pytest.approx(ceiling["decode_ceiling_tok_s"] / 2)
