"""Does serving /metrics stall the simulator's own steps? A plain client's worst gap, with and without a scraper.

Starts `phasetop sim` (H100 SXM + 8B, 16 bit) pinned to one CPU core and runs N concurrent streamed completions
read over raw asyncio sockets on another core: each stream's gaps are the times between reads that carry a token
event, from the moment every stream has its first token (before it, the batch's own prefills set the gaps). For
each N, the same run measures three modes back to back: no scraper, and /metrics polled at 4 Hz and at 20 Hz over
one kept-alive raw socket (the scrape's own latency is recorded too). Each mode is repeated (the order
rotated each time) and the table gives the minimum and median over the repeats, since on a shared 2-core machine a
single pair says little; the 1-minute load average stands beside each row. Beside the client's gaps, the simulator's
own step lag (`/sim/emission`: a chunk handed to its socket minus its step's deadline; its p99 and its worst) shows
a stalled step directly, where a client's worst gap mixes it with its own wake-ups.

Target (the simulator does not stall itself): the worst gap with /metrics polled at 4 Hz within 1 ms of the worst
gap without polling (medians over the repeats), at 8 and 32 streams.

    .venv/bin/python bench/sim_metrics_stall.py [--streams 8,32] [--repeats 3] [--max-tokens 600] [--rates 4,20]

Prints a table and the target beside the measurement, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a plain script from anywhere

import httpx  # noqa: E402
from sim_emission import pin, raw_completion  # noqa: E402
from tui.sources.servers.simulator_server import SimulatorProcess  # noqa: E402

SLOW_GAP_S = 0.015
"""A gap this long counts as a stall (about three decode steps of the 8B model on an H100)."""
TARGET_STREAMS = (8, 32)
TARGET_RATE_HZ = 4.0
TARGET_WORST_GAP_MS = 1.0


async def timed_stream(host: str, port: int, index: int, max_tokens: int) -> list[float]:
    """One streamed completion over a raw socket: when each read that carried a token event came (perf_counter)."""
    reader, writer = await raw_completion(host, port, f"stall {index}", max_tokens)
    reads: list[float] = []
    while chunk := await reader.read(65536):
        now = time.perf_counter()  # perf_counter here: nothing slower between the read and the stamp
        if b"data: {" in chunk:  # not the headers, nor only [DONE]
            reads.append(now)
    writer.close()
    return reads


def decode_gaps(per_stream: list[list[float]]) -> list[float]:
    """Every stream's gaps from the moment all of them had their first token: the batch's own prefills (a step of
    tens of milliseconds while the last streams arrive) are physics, not a stall."""
    all_decoding = max(reads[0] for reads in per_stream if reads)
    return [later - earlier for reads in per_stream for earlier, later in zip(reads, reads[1:]) if earlier >= all_decoding]


async def poll_metrics(host: str, port: int, rate_hz: float, stop: asyncio.Event) -> list[float]:
    """GET /metrics every 1/rate_hz seconds on one kept-alive raw socket until `stop`; each scrape's latency (seconds)."""
    reader, writer = await asyncio.open_connection(host, port)
    request = f"GET /metrics HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    latencies: list[float] = []
    loop = asyncio.get_running_loop()
    next_at = loop.time()
    while not stop.is_set():
        started = time.perf_counter()
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        await reader.readexactly(length)
        latencies.append(time.perf_counter() - started)
        next_at += 1 / rate_hz
        try:
            await asyncio.wait_for(stop.wait(), max(0.0, next_at - loop.time()))
        except TimeoutError:
            pass
    writer.close()
    return latencies


async def run_mode(url: str, streams: int, max_tokens: int, rate_hz: float) -> dict:
    """One mode: N streams at once, with /metrics polled at `rate_hz` meanwhile (0: not polled)."""
    parts = urlsplit(url)
    async with httpx.AsyncClient(base_url=url) as client:
        await client.get("/sim/emission", params={"reset": "1"})
    stop = asyncio.Event()
    poller = asyncio.create_task(poll_metrics(parts.hostname, parts.port, rate_hz, stop)) if rate_hz else None
    per_stream = await asyncio.gather(*(timed_stream(parts.hostname, parts.port, i, max_tokens) for i in range(streams)))
    stop.set()
    scrapes = await poller if poller is not None else []
    async with httpx.AsyncClient(base_url=url) as client:
        lag = (await client.get("/sim/emission")).json()["lag_s"]  # read with the streams done: summing 20k samples
    gaps = decode_gaps(per_stream)
    return {
        "worst_gap_ms": round(max(gaps) * 1e3, 3),
        "gaps_over_15ms": sum(1 for gap in gaps if gap > SLOW_GAP_S),
        "gaps": len(gaps),
        "lag_p99_ms": round(lag["p99"] * 1e3, 3),
        "lag_max_ms": round(lag["max"] * 1e3, 3),
        "scrapes": len(scrapes),
        "scrape_p50_ms": round(statistics.median(scrapes) * 1e3, 3) if scrapes else None,
        "scrape_max_ms": round(max(scrapes) * 1e3, 3) if scrapes else None,
        "load_1min": round(os.getloadavg()[0], 2),
    }


def summarize_level(streams: int, rate_hz: float, runs: list[dict]) -> dict:
    """Min and median over the repeats of one level and mode."""
    worst = [run["worst_gap_ms"] for run in runs]
    slow = [run["gaps_over_15ms"] for run in runs]
    scrape = [run["scrape_p50_ms"] for run in runs if run["scrape_p50_ms"] is not None]
    lag_max = [run["lag_max_ms"] for run in runs]
    return {
        "streams": streams, "rate_hz": rate_hz, "repeats": len(runs),
        "worst_gap_ms_min": min(worst), "worst_gap_ms_median": round(statistics.median(worst), 3),
        "gaps_over_15ms_min": min(slow), "gaps_over_15ms_median": statistics.median(slow),
        "lag_max_ms_min": min(lag_max), "lag_max_ms_median": round(statistics.median(lag_max), 3),
        "lag_p99_ms_median": round(statistics.median(run["lag_p99_ms"] for run in runs), 3),
        "scrape_p50_ms_median": round(statistics.median(scrape), 3) if scrape else None,
        "scrape_max_ms": max((run["scrape_max_ms"] for run in runs if run["scrape_max_ms"] is not None), default=None),
        "load_1min": runs[-1]["load_1min"], "runs": runs,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="8,32", help="comma-separated concurrency levels")
    parser.add_argument("--rates", default="4,20", help="comma-separated /metrics polling rates (Hz) beside no polling")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=600)
    args = parser.parse_args()
    levels = [int(v) for v in args.streams.split(",")]
    modes = [0.0, *(float(v) for v in args.rates.split(","))]
    rows = []
    with SimulatorProcess.start() as sim:
        cores = os.cpu_count() or 1
        pinned = pin(sim.process.pid, 0)
        if pinned and cores > 1:
            pin(os.getpid(), 1)
        asyncio.run(run_mode(sim.url, 1, 8, 0.0))  # warm-up
        for streams in levels:
            runs: dict[float, list[dict]] = {mode: [] for mode in modes}
            for repeat in range(args.repeats):
                order = modes[repeat % len(modes):] + modes[:repeat % len(modes)]  # rotated: drift spreads over modes
                for mode in order:
                    runs[mode].append(asyncio.run(run_mode(sim.url, streams, args.max_tokens, mode)))
            rows += [summarize_level(streams, mode, runs[mode]) for mode in modes]
    print(f"simulator pinned to one core: {pinned}; {cores} cores; max_tokens {args.max_tokens}; "
          f"{args.repeats} repeats per mode", file=sys.stderr)
    print(f"{'streams':>8} {'/metrics':>9} {'worst gap ms':>19} {'gaps > 15 ms':>13} {'step lag ms':>25} "
          f"{'scrape ms':>17} {'load 1m':>8}")
    print(f"{'':>8} {'':>9} {'min':>9} {'median':>9} {'min':>6} {'med':>6} {'p99 med':>8} {'max min':>8} {'max med':>8} "
          f"{'p50':>8} {'max':>8}")
    for row in rows:
        rate = "off" if not row["rate_hz"] else f"{row['rate_hz']:g} Hz"
        p50 = "-" if row["scrape_p50_ms_median"] is None else f"{row['scrape_p50_ms_median']:.2f}"
        top = "-" if row["scrape_max_ms"] is None else f"{row['scrape_max_ms']:.2f}"
        print(f"{row['streams']:>8} {rate:>9} {row['worst_gap_ms_min']:>9.2f} {row['worst_gap_ms_median']:>9.2f} "
              f"{row['gaps_over_15ms_min']:>6} {row['gaps_over_15ms_median']:>6g} {row['lag_p99_ms_median']:>8.2f} "
              f"{row['lag_max_ms_min']:>8.2f} {row['lag_max_ms_median']:>8.2f} {p50:>8} {top:>8} {row['load_1min']:>8.2f}")
    target = target_line(rows)
    print(target["line"])
    print(json.dumps({"bench": "sim_metrics_stall", "pinned_one_core": pinned, "max_tokens": args.max_tokens,
                      "repeats": args.repeats, "target": {k: v for k, v in target.items() if k != "line"}, "rows": rows}))
    return 0


def target_line(rows: list[dict]) -> dict:
    """The target beside the measurement: the 4 Hz median worst gap minus the unpolled one, at 8 and 32 streams."""
    excess: dict[int, float] = {}
    for streams in TARGET_STREAMS:
        off = next((r for r in rows if r["streams"] == streams and not r["rate_hz"]), None)
        polled = next((r for r in rows if r["streams"] == streams and r["rate_hz"] == TARGET_RATE_HZ), None)
        if off is not None and polled is not None:
            excess[streams] = round(polled["worst_gap_ms_median"] - off["worst_gap_ms_median"], 3)
    if len(excess) < len(TARGET_STREAMS):
        return {"line": f"target: not measured (needs {TARGET_STREAMS} streams, off and {TARGET_RATE_HZ:g} Hz)", "met": None}
    met = all(value <= TARGET_WORST_GAP_MS for value in excess.values())
    figures = ", ".join(f"{value:+.2f} ms at {streams}" for streams, value in excess.items())
    return {"line": f"target: worst gap with /metrics at {TARGET_RATE_HZ:g} Hz within {TARGET_WORST_GAP_MS:g} ms of "
                    f"unpolled (medians), at {' and '.join(map(str, TARGET_STREAMS))} streams; measured {figures} "
                    f"({'met' if met else 'missed'})",
            "met": met, "excess_ms": excess}


if __name__ == "__main__":
    raise SystemExit(main())
