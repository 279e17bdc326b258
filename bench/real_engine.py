"""The README's real-engine table: what phasetop measures on llama.cpp's llama-server (Gemma 3 270M
Q4_K_M, one CPU thread, 4 slots), started with phasetop's own launcher.

    .venv/bin/python bench/real_engine.py [--model FILE]   (after `make real-engine`)

Prints a Markdown table: TTFT and decode at 100 and 1,000 prompt tokens (client beside server), the
same prompt twice (prompt cache), and 1 vs 4 streams at once. Medians of alternating repeats.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
from pathlib import Path
from statistics import median

from real_common import itl_p50, ms
from real_common import fresh as fresh_prompts
from real_common import send as send_prompts

from tui.core.experiments.rows import aggregate_tok_s
from tui.core.measure.reconcile import reconcile
from tui.core.measure.records import RequestTiming
from tui.sources.servers.llamacpp_server import LlamaServerProcess
from tui.sources.workloads.prompts import Prompt

REPO = Path(__file__).resolve().parent.parent
MAX_TOKENS = 64
REPEATS = 3


async def send(url: str, prompts: list[Prompt], max_tokens: int = MAX_TOKENS) -> list[RequestTiming]:
    return await send_prompts(url, "llamacpp", "m", prompts, max_tokens)


async def fresh(url: str, n_tokens: int, count: int = 1) -> list[Prompt]:
    return await fresh_prompts(url, "llamacpp", "m", n_tokens, count)


async def measure_all(url: str) -> list[str]:
    rows = ["| what phasetop measured | client | server (llama.cpp `timings`) |", "|---|---|---|"]
    by_size: dict[int, list[RequestTiming]] = {100: [], 1000: []}
    for _ in range(REPEATS):
        for size in by_size:
            by_size[size] += await send(url, await fresh(url, size))
    for size, timings in by_size.items():
        both = [reconcile(t) for t in timings]
        rows.append(f"| TTFT, {size:,}-token prompt | {ms(median(b.client_ttft_s for b in both))} | "
                    f"prompt {ms(median(b.server_prompt_s for b in both))} (gap {ms(median(b.ttft_gap_s for b in both))}) |")
        rows.append(f"| decode, {size:,}-token prompt | {median(b.client_decode_tok_s for b in both):.1f} tok/s | "
                    f"{median(b.server_decode_tok_s for b in both):.1f} tok/s |")
    long = by_size[1000]
    rows.append(f"| prefill rate, 1,000-token prompt | {median(t.client_prefill_tok_s for t in long):,.0f} tok/s | "
                f"{median(t.server_split.prefill_tok_s for t in long):,.0f} tok/s |")
    prompt = (await fresh(url, 1000))[0]
    first, second = (await send(url, [prompt]))[0], (await send(url, [prompt]))[0]
    rows.append(f"| same 1,000-token prompt twice: TTFT | {ms(first.ttft_s)} → {ms(second.ttft_s)} | "
                f"{second.server_split.cached_tokens} of {second.prompt_tokens} tokens from the cache |")
    singles = [(await send(url, await fresh(url, 100)))[0] for _ in range(REPEATS)]
    batches = [await send(url, await fresh(url, 100, 4)) for _ in range(REPEATS)]
    rows.append(f"| 1 stream (100-token prompts) | {median(aggregate_tok_s([t]) for t in singles):.1f} tok/s, "
                f"ITL p50 {ms(itl_p50(singles))}, TTFT {ms(median(t.ttft_s for t in singles))} | |")
    rows.append(f"| 4 streams at once | {median(aggregate_tok_s(b) for b in batches):.1f} tok/s in all, "
                f"ITL p50 {ms(itl_p50([t for b in batches for t in b]))}, TTFT {ms(median(t.ttft_s for b in batches for t in b))} | |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="GGUF file (default: the one `make real-engine` assembled)")
    args = parser.parse_args()
    model = args.model or subprocess.run([str(REPO / "scripts" / "real_engine.sh"), "model-path"],
                                         check=True, capture_output=True, text=True).stdout.strip()
    load_before = os.getloadavg()[0]
    with LlamaServerProcess.start(model) as server:
        rows = asyncio.run(measure_all(server.url))
    print("\n".join(rows))
    print(f"\n(load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} cores; "
          f"llama-server -t 1 -np 4 -c 8192, {MAX_TOKENS} tokens per answer, medians of {REPEATS})")


if __name__ == "__main__":
    main()
