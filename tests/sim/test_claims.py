"""The domain text's claims, measured against the running simulator through phasetop's own clients.

Every request goes through `tui.sources.stream.measure` (the client `probe` uses), prompts of N
tokens come from `tui.sources.workloads.prompts.prompt_of`, server gauges from `tui.sources.scrape`. Margins
are wide: the physics gives 2–7× what each assertion needs, so a loaded 2-core machine still passes.
Claims that compare ratios run on a `--time-scale 2` simulator (ratios do not move; jitter matters less).
"""

from __future__ import annotations

import asyncio
import statistics

import pytest

from tui.core.measure.records import RequestTiming
from tui.core.hardware.roofline import decode_ceiling_tok_s, weight_bytes
from tui.core.measure.stats import summarize
from tui.sources.http import make_client
from tui.sources.workloads.prompts import prompt_of
from tui.sources.scrape import MetricsScraper
from tui.sources.stream import StreamRequest, measure

pytestmark = pytest.mark.timing

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SLOWED = ("--time-scale", "2")


async def one(client, prompt: str, max_tokens: int) -> RequestTiming:
    timing = await measure(client, StreamRequest(api="openai", model=MODEL, prompt=prompt, max_tokens=max_tokens))
    assert timing.ok, timing.error
    assert timing.output_tokens == max_tokens
    return timing


async def prompt_text(client, tokens: int) -> str:
    prompt = await prompt_of(client, "openai", MODEL, tokens)
    assert prompt.tokens == tokens and not prompt.estimated
    return prompt.text


async def warm(client) -> None:
    """One throwaway request: the first one on a connection pays for code warm-up on both sides."""
    await one(client, await prompt_text(client, 20), 4)


async def test_one_stream_decodes_within_3_percent_below_the_209_ceiling(sim):
    ceiling = decode_ceiling_tok_s(3350, weight_bytes(8.0e9, 16))
    assert round(ceiling, 1) == 209.4
    async with make_client(sim.url) as client:
        await warm(client)
        rates = [(await one(client, await prompt_text(client, 20), 256)).decode_tok_s for _ in range(5)]
    measured = statistics.median(rates)
    # Above the ceiling by at most 0.5 %: a first token read late (the simulator's loop or this client woken late
    # on a loaded box; the simulator then keeps its schedule) shortens the timed span by that lateness. Over 64
    # tokens (a 0.3 s span) CI saw 2.9 ms of it, +0.95 %, and a median of +0.5 %; over 256 (1.2 s) the same
    # lateness is +0.24 %.
    assert 0.97 * ceiling <= measured <= 1.005 * ceiling, rates


async def test_ttft_grows_with_the_prompt_while_decode_rate_barely_moves(start_sim):
    sim = start_sim(*SLOWED)
    async with make_client(sim.url) as client:
        await warm(client)
        short = [await one(client, await prompt_text(client, 200), 32) for _ in range(3)]
        long = [await one(client, await prompt_text(client, 2000), 32) for _ in range(3)]
    ttft_short = statistics.median(t.ttft_s for t in short)
    ttft_long = statistics.median(t.ttft_s for t in long)
    decode_short = statistics.median(t.decode_tok_s for t in short)
    decode_long = statistics.median(t.decode_tok_s for t in long)
    assert ttft_long >= 5 * ttft_short, (ttft_short, ttft_long)
    assert abs(decode_long - decode_short) / decode_short < 0.10, (decode_short, decode_long)
    prefill_long = statistics.median(t.prefill_tok_s for t in long)
    assert prefill_long >= 20 * decode_long, (prefill_long, decode_long)  # prefill rate ≫ decode rate


@pytest.mark.parametrize("caching", [True, False])
async def test_a_shared_prefix_sent_twice_skips_prefill_only_with_prefix_caching(start_sim, caching):
    sim = start_sim(*SLOWED, "--enable-prefix-caching" if caching else "--no-enable-prefix-caching")
    async with make_client(sim.url) as client:
        await warm(client)
        prefix = await prompt_text(client, 2000)
        first = await one(client, prefix, 8)
        second = await one(client, prefix, 8)
    ratio = first.ttft_s / second.ttft_s
    if caching:
        assert ratio >= 3, (first.ttft_s, second.ttft_s)
    else:
        assert 0.7 < ratio < 1.4, (first.ttft_s, second.ttft_s)


async def test_decode_slows_as_the_context_grows(start_sim):
    sim = start_sim(*SLOWED)
    async with make_client(sim.url) as client:
        await warm(client)
        near = await one(client, await prompt_text(client, 200), 64)
        far = await one(client, await prompt_text(client, 8000), 64)
    # Mean ITL (TPOT): steps end on absolute deadlines, so the mean is exact where single gaps carry
    # the event loop's 1 ms timer granularity. The physics: 8k × 128 KiB more per step is 6.5 % longer.
    itl_near, itl_far = near.tpot_s, far.tpot_s
    assert itl_far > 1.02 * itl_near, (itl_near, itl_far)


def aggregate_tok_s(timings: list[RequestTiming]) -> float:
    start = min(t.t_sent_unix for t in timings)
    end = max(t.t_sent_unix + t.e2e_s for t in timings)
    return sum(t.output_tokens for t in timings) / (end - start)


async def test_32_streams_multiply_throughput_and_stretch_the_tail(start_sim):
    sim = start_sim(*SLOWED)
    async with make_client(sim.url) as client:
        await warm(client)
        single = await one(client, await prompt_text(client, 200), 64)
        prompts = [await prompt_text(client, 200) for _ in range(32)]
        batch = await asyncio.gather(*(one(client, p, 64) for p in prompts))
    single_tok_s = aggregate_tok_s([single])
    batch_tok_s = aggregate_tok_s(list(batch))
    assert batch_tok_s >= 10 * single_tok_s, (single_tok_s, batch_tok_s)
    single_p99 = summarize(single.itl_s).p99
    batch_p99 = summarize(gap for t in batch for gap in t.itl_s).p99
    assert batch_p99 > single_p99, (single_p99, batch_p99)


async def max_itl_with_a_long_prompt_landing(sim) -> float:
    """Eight streams decoding; a 4,000-token prompt arrives among them; their worst gap."""
    async with make_client(sim.url) as client:
        await warm(client)
        prompts = [await prompt_text(client, 50) for _ in range(8)]
        long_prompt = await prompt_text(client, 4000)
        streams = [asyncio.create_task(one(client, p, 96)) for p in prompts]
        await asyncio.sleep(0.1)  # all eight are decoding (TTFT ≈ 10 ms)
        intruder = await one(client, long_prompt, 2)
        timings = await asyncio.gather(*streams)
    assert intruder.ttft_s > 0
    return max(gap for t in timings for gap in t.itl_s)


async def test_chunked_prefill_shields_running_streams_from_a_long_prompt(start_sim):
    chunked = await max_itl_with_a_long_prompt_landing(start_sim("--max-num-batched-tokens", "512"))
    whole = await max_itl_with_a_long_prompt_landing(start_sim("--no-enable-chunked-prefill"))
    # The physics: one 4,000-token step ≈ 140 ms without chunking; ≈ 20 ms steps with 512-token chunks.
    assert whole > 0.1, whole
    assert chunked < whole / 2, (chunked, whole)


async def test_load_above_capacity_queues_fills_the_kv_pool_and_preempts(start_sim):
    # 0.205 × 80 GB − 16 GB of weights leaves 190 blocks (3,040 tokens) of KV cache.
    sim = start_sim("--gpu-memory-utilization", "0.205", "--max-model-len", "2048")
    async with make_client(sim.url) as client:
        prompts = [await prompt_text(client, 300) for _ in range(16)]
        scraper = MetricsScraper(client)
        await scraper.read()
        requests = [asyncio.create_task(one(client, p, 400)) for p in prompts]
        saturated = None
        try:
            for _ in range(100):
                await asyncio.sleep(0.05)
                snapshot = await scraper.read()
                if snapshot.waiting and snapshot.kv_cache_usage >= 0.95 and snapshot.preemptions_total:
                    saturated = snapshot
                    break
        finally:
            for task in requests:
                task.cancel()
            await asyncio.gather(*requests, return_exceptions=True)
    assert saturated is not None, "never saw waiting > 0 with the KV cache full and preemptions"
    assert saturated.saturated
