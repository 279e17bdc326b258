"""What the real-server benchmarks (bench/real_engine.py, bench/real_vllm.py) share: send prompts the way
phasetop does, fit fresh prompts to an exact length, and write the figures."""

from __future__ import annotations

import asyncio
from statistics import median

from tui.core.measure.records import RequestTiming
from tui.sources.http import make_client
from tui.sources.workloads.prompts import Prompt, prompt_of
from tui.sources.meter import LocalMeter
from tui.sources.stream import StreamRequest


async def send(url: str, api: str, model: str, prompts: list[Prompt], max_tokens: int) -> list[RequestTiming]:
    """The prompts sent together, each on a warmed connection (so TTFT holds no connect)."""
    async with make_client(url, timeout_s=300) as client:
        meter = LocalMeter(client)  # as the CLI times them
        connect_s = await meter.warm_up("/health", len(prompts))
        requests = [StreamRequest(api, model, p.text, max_tokens, prompt_tokens=p.tokens) for p in prompts]
        timings = list(await asyncio.gather(*(meter.measure(r, connect_s) for r in requests)))
    failed = [t.error for t in timings if not t.ok]
    if failed:
        raise SystemExit(f"a request failed: {failed[0]}")
    return timings


async def fresh(url: str, api: str, model: str, n_tokens: int, count: int = 1) -> list[Prompt]:
    """`count` prompts of exactly `n_tokens` by the server's tokenizer, each under its own nonce (no cache hits)."""
    async with make_client(url) as client:
        return [await prompt_of(client, api, model, n_tokens) for _ in range(count)]


def ms(seconds: float, digits: int = 0) -> str:
    return f"{seconds * 1000:,.{digits}f} ms"


def itl_p50(timings: list[RequestTiming]) -> float:
    """The median of every gap of every request."""
    return median(gap for t in timings for gap in t.itl_s)
