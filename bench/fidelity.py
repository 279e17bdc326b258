"""How faithfully phasetop's client times a stream, against a bare httpx client.

A scripted server (another process, so its CPU is not the client's) sends every token at a known
time and logs when it wrote each chunk. For each client: TTFT error = client TTFT − the server's
(request arrived → first chunk written); ITL error = client gap − written gap; plus the client's CPU
seconds for the run. At 1 and at 32 concurrent streams. Run: `python bench/fidelity.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from time import perf_counter_ns

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a plain script from anywhere

import httpx  # noqa: E402

from tests.scripted_server import count_tokens  # noqa: E402
from tui.core.stats import percentile  # noqa: E402
from tui.sources.http import make_client  # noqa: E402
from tui.sources.prompts import filler_text, make_nonce  # noqa: E402
from tui.sources.stream import StreamRequest, measure, warm_up  # noqa: E402


def prompts(n: int, n_tokens: int) -> list[str]:
    """Prompts of exactly n_tokens by the scripted server's tokenizer, each with its own nonce."""
    out = []
    for _ in range(n):
        nonce = make_nonce()
        out.append(filler_text(nonce, n_tokens - count_tokens(nonce)))
    return out


async def run_phasetop(url: str, texts: list[str], streams: int, max_tokens: int) -> dict[str, list[float]]:
    """Client offsets per nonce, from phasetop's measure(): clock on the wire, connections warmed first."""
    offsets: dict[str, list[float]] = {}
    gate = asyncio.Semaphore(streams)
    async with make_client(url, max_connections=max(streams, 1)) as client:
        await warm_up(client, "/v1/models", connections=streams)

        async def one(text: str) -> None:
            async with gate:
                timing = await measure(client, StreamRequest("openai", "scripted-model", text, max_tokens))
            if not timing.ok:
                raise RuntimeError(timing.error)
            offsets[text.split()[0]] = list(timing.token_offsets_s)

        await asyncio.gather(*(one(t) for t in texts))
    return offsets


async def run_bare_httpx(url: str, texts: list[str], streams: int, max_tokens: int) -> dict[str, list[float]]:
    """The reference: the clock starts before client.stream(), lines via aiter_lines, as most benchmark clients do."""
    offsets: dict[str, list[float]] = {}
    gate = asyncio.Semaphore(streams)
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:

        async def one(text: str) -> None:
            body = {"model": "scripted-model", "prompt": text, "max_tokens": max_tokens, "stream": True,
                    "stream_options": {"include_usage": True}}
            async with gate:
                arrivals = []
                start = perf_counter_ns()
                async with client.stream("POST", "/v1/completions", json=body) as response:
                    async for line in response.aiter_lines():
                        if line.startswith("data: ") and line != "data: [DONE]":
                            chunk = json.loads(line[6:])
                            if chunk["choices"] and chunk["choices"][0]["text"]:
                                arrivals.append((perf_counter_ns() - start) / 1e9)
            offsets[text.split()[0]] = arrivals

        await asyncio.gather(*(one(t) for t in texts))
    return offsets


def errors_ms(offsets: dict[str, list[float]], log: list[dict]) -> tuple[list[float], list[float]]:
    """(TTFT errors, ITL errors) in ms: measured − written, matched to the server's log by nonce."""
    written = {entry["nonce"]: entry for entry in log}
    ttft, itl = [], []
    for nonce, measured in offsets.items():
        entry = written[nonce]
        writes = [(t - entry["received_ns"]) / 1e9 for t in entry["content_write_ns"]]
        ttft.append((measured[0] - writes[0]) * 1000)
        itl += [((m1 - m0) - (w1 - w0)) * 1000 for m0, m1, w0, w1 in zip(measured, measured[1:], writes, writes[1:])]
    return ttft, itl


def figures(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50": statistics.median(ordered), "p99": percentile(ordered, 99)}


async def bench(url: str, args: argparse.Namespace) -> list[dict]:
    rows = []
    async with httpx.AsyncClient(base_url=url) as admin:
        for streams in args.streams:
            for name, runner in (("phasetop", run_phasetop), ("bare httpx", run_bare_httpx)):
                texts = prompts(args.requests, args.prompt_tokens)
                cpu = time.process_time()
                offsets = await runner(url, texts, streams, args.tokens)
                cpu = time.process_time() - cpu
                ttft, itl = errors_ms(offsets, (await admin.get("/_log")).json())
                rows.append({"client": name, "streams": streams, "requests": len(offsets),
                             "ttft_error_ms": figures(ttft), "itl_error_ms": figures(itl), "cpu_s": cpu})
    return rows


def table(rows: list[dict]) -> str:
    lines = [f"{'client':<11} {'streams':>7} {'TTFT err p50 ms':>15} {'p99':>7} {'ITL err p50 ms':>14} {'p99':>7} {'CPU s':>7}"]
    for r in rows:
        lines.append(
            f"{r['client']:<11} {r['streams']:>7} {r['ttft_error_ms']['p50']:>15.3f} {r['ttft_error_ms']['p99']:>7.3f} "
            f"{r['itl_error_ms']['p50']:>14.3f} {r['itl_error_ms']['p99']:>7.3f} {r['cpu_s']:>7.2f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--prompt-tokens", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--itl", type=float, default=0.01, help="seconds between the server's tokens")
    parser.add_argument("--ttft", type=float, default=0.02, help="seconds from arrival to the server's first token")
    args = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "scripted_server.py"), "--tokens", str(args.tokens),
         "--itl", str(args.itl), "--ttft", str(args.ttft)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        url = server.stdout.readline().strip()
        rows = asyncio.run(bench(url, args))
    finally:
        server.terminate()
        server.wait(10)
    print(table(rows))
    print(json.dumps({"fidelity": rows, "workload": vars(args)}))


if __name__ == "__main__":
    main()
