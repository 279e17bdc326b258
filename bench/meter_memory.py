"""A meter process's memory over 10M streamed tokens: its RSS at intervals, real streams read as fast as it reads them.

A scripted server (testbeds/scripted_server.py, another process on uvloop) sends 1,000 tokens a request, one every
0.5 ms; one meter process (`tui.meter.pool.MeterPool`, as the UI runs it) reads 16 of them at a time, each through
`RemoteMeter.stream` with its frames (as the UI's sends are read), round after round. RSS is psutil's, of the meter
process, printed every `--every` tokens; the figure to read is the growth after warm-up (the first interval).
The server's write log is emptied each round (it would grow with every token). Target: flat, ≤ 150 MB.

    .venv/bin/python bench/meter_memory.py [--tokens 10000000] [--every 1000000] [--streams 16]

Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from contextlib import aclosing
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tui.meter.pool import MeterPool  # noqa: E402
from tui.sources import loop  # noqa: E402
from tui.sources.http import make_client  # noqa: E402
from tui.sources.meter import ChunksArrived  # noqa: E402
from tui.sources.stream import RequestFinished, StreamRequest  # noqa: E402

TOKENS_PER_REQUEST = 1000
ITL_S = 0.0005
TARGET_MB = 150


def start_server() -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen([sys.executable, str(ROOT / "testbeds" / "scripted_server.py"), "--tokens",
                               str(TOKENS_PER_REQUEST), "--itl", str(ITL_S), "--ttft", "0.005", "--uvloop"],
                              stdout=subprocess.PIPE, text=True)
    return server, server.stdout.readline().strip()


async def one(meter, request: StreamRequest) -> int:
    """One stream read to its end through its frames; the chunks it read."""
    read = 0
    async with aclosing(meter.stream(request, text=True)) as events:
        async for event in events:
            if isinstance(event, ChunksArrived):
                read += len(event.offsets_s)
            elif isinstance(event, RequestFinished) and not event.timing.ok:
                raise RuntimeError(event.timing.error)
    return read


async def drive(url: str, total: int, every: int, streams: int) -> list[dict]:
    pool = MeterPool(1)
    marks: list[dict] = []
    started = time.monotonic()
    try:
        async with make_client(url) as client, httpx.AsyncClient(base_url=url) as control:
            meter = pool.meter_for(client)
            await meter.warm_up("/v1/models", streams)
            meter_process = psutil.Process(pool.links[0].pid)
            request = StreamRequest("openai", "scripted-model", "bench " * 50, TOKENS_PER_REQUEST)
            streamed = 0
            while streamed < total:
                streamed += sum(await asyncio.gather(*(one(meter, request) for _ in range(streams))))
                await control.get("/_log/take")
                if not marks or streamed // every != marks[-1]["tokens"] // every or streamed >= total:
                    marks.append({"tokens": streamed, "rss_mb": round(meter_process.memory_info().rss / 1e6, 1),
                                  "s": round(time.monotonic() - started, 1), "load_avg_1m": round(os.getloadavg()[0], 2)})
                    print(f"{streamed:>12,} tokens  meter RSS {marks[-1]['rss_mb']:7.1f} MB  {marks[-1]['s']:7.1f} s  "
                          f"load 1m {marks[-1]['load_avg_1m']:.2f}", file=sys.stderr, flush=True)
    finally:
        pool.close()
    return marks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=10_000_000, help="tokens streamed in all (default 10M)")
    parser.add_argument("--every", type=int, default=1_000_000, help="RSS printed every this many tokens (default 1M)")
    parser.add_argument("--streams", type=int, default=16, help="streams at once (default 16)")
    args = parser.parse_args()
    server, url = start_server()
    try:
        marks = loop.run(drive(url, args.tokens, args.every, args.streams))
    finally:
        server.kill()
    warm, end = (marks[1] if len(marks) > 2 else marks[0]), marks[-1]
    growth = end["rss_mb"] - warm["rss_mb"]
    rate = end["tokens"] / end["s"] if end["s"] else 0.0
    print(f"{'tokens':>12} {'meter RSS MB':>13} {'s':>7} {'load 1m':>8}")
    for mark in marks:
        print(f"{mark['tokens']:>12,} {mark['rss_mb']:>13.1f} {mark['s']:>7.1f} {mark['load_avg_1m']:>8.2f}")
    print(f"meter RSS at {end['tokens']:,} tokens: {end['rss_mb']:.1f} MB (target ≤ {TARGET_MB} MB: "
          f"{'met' if end['rss_mb'] <= TARGET_MB else 'NOT met'}); after warm-up ({warm['tokens']:,} tokens): "
          f"{growth:+.1f} MB; {rate:,.0f} tokens a second read")
    print(json.dumps({"bench": "meter_memory", "tokens": end["tokens"], "rss_end_mb": end["rss_mb"],
                      "rss_warm_mb": warm["rss_mb"], "growth_mb": round(growth, 1), "tokens_per_s": round(rate),
                      "target_mb": TARGET_MB, "marks": marks}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
