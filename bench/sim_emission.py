"""Emission accuracy of the simulator: how late tokens are written versus their simulated time.

Starts `phasetop sim` (H100 SXM + 8B, 16 bit) pinned to one CPU core, runs N concurrent streams
for each N, and reads the simulator's own lag samples (`/sim/emission`: the moment a chunk was
handed to the socket minus its step's deadline) and its CPU use over the run. The client reads raw
bytes over plain asyncio sockets, on the other cores, so it is not the bottleneck.

    .venv/bin/python bench/sim_emission.py [--streams 1,32,128] [--max-tokens 128]

Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from urllib.parse import urlsplit

import httpx
import psutil

from tui.sim.launcher import SimulatorProcess


async def one_stream(host: str, port: int, index: int, max_tokens: int) -> int:
    """One streamed completion over a raw socket; returns the number of SSE events read."""
    body = json.dumps({"prompt": f"[bench {index} {time.time_ns()}] " + "word " * 50, "max_tokens": max_tokens,
                       "stream": True}).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(head + body)
    await writer.drain()
    events = 0
    while chunk := await reader.read(65536):
        events += chunk.count(b"data: ")
    writer.close()
    return events


async def run_level(url: str, pid: int, streams: int, max_tokens: int) -> dict:
    parts = urlsplit(url)
    process = psutil.Process(pid)
    async with httpx.AsyncClient(base_url=url) as client:
        await client.get("/sim/emission", params={"reset": "1"})
        cpu_before = sum(process.cpu_times()[:2])
        started = time.monotonic()
        events = await asyncio.gather(*(one_stream(parts.hostname, parts.port, i, max_tokens) for i in range(streams)))
        wall = time.monotonic() - started
        cpu = sum(process.cpu_times()[:2]) - cpu_before
        lag = (await client.get("/sim/emission")).json()["lag_s"]
    return {
        "streams": streams,
        "tokens": sum(events) - streams,  # minus the [DONE] event of each stream
        "wall_s": round(wall, 3),
        "lag_p50_ms": round(lag["p50"] * 1e3, 3),
        "lag_p99_ms": round(lag["p99"] * 1e3, 3),
        "samples": lag["n"],
        "sim_cpu_share": round(cpu / wall, 3),
    }


def pin(pid: int, core: int) -> bool:
    """Put a process on one core (Linux); False where affinity cannot be set."""
    try:
        psutil.Process(pid).cpu_affinity([core])
        return True
    except (AttributeError, psutil.Error, OSError):
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="1,32,128", help="comma-separated concurrency levels")
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    levels = [int(v) for v in args.streams.split(",")]
    with SimulatorProcess.start() as sim:
        cores = os.cpu_count() or 1
        pinned = pin(sim.process.pid, 0)
        if pinned and cores > 1:
            pin(os.getpid(), 1)
        asyncio.run(run_level(sim.url, sim.process.pid, 1, 8))  # warm-up
        rows = [asyncio.run(run_level(sim.url, sim.process.pid, n, args.max_tokens)) for n in levels]
    print(f"simulator pinned to one core: {pinned}; {cores} cores; max_tokens {args.max_tokens}", file=sys.stderr)
    print(f"{'streams':>8} {'tokens':>8} {'wall s':>8} {'lag p50 ms':>11} {'lag p99 ms':>11} {'sim CPU':>8}")
    for row in rows:
        print(f"{row['streams']:>8} {row['tokens']:>8} {row['wall_s']:>8.2f} {row['lag_p50_ms']:>11.3f} "
              f"{row['lag_p99_ms']:>11.3f} {row['sim_cpu_share']:>7.0%}")
    print(json.dumps({"bench": "sim_emission", "pinned_one_core": pinned, "max_tokens": args.max_tokens, "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
