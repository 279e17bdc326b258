"""phasetop bench against a plain client: do they read the same latencies, what does it cost, how fast can it go.

1. Agreement. One simulator (`phasetop sim`: H100 SXM + 8B at 16 bit, a child process), one seeded
   workload, sent in turn by phasetop's LoadRunner (the engine of `phasetop bench`) and by a plain
   client written here the way `vllm bench serve` writes its own: httpx, the clock started just
   before the POST, SSE lines via aiter_lines, the first chunk with text is the first token, one ITL
   per chunk. Two workloads: Poisson arrivals at --rate (the simulator's TTFT then varies with what
   else is in the batch), and one request at a time (the simulator's timing is then the same for
   every request, so what differs is the clients). Rounds go phasetop, plain, phasetop, plain; TTFT
   and ITL p50/p90/p99 of each, their differences, and phasetop against itself (run-to-run noise).
   The plain client also notes when its request body went on the wire (httpx's trace hook, which
   costs it nothing): its TTFT minus that lead-in is the span phasetop measures.
2. CPU. This process's CPU seconds (user + system; the servers are other processes) per 10k streamed
   tokens, for both clients, in every run here.
3. Timing error against rate. The simulator keeps no per-chunk log, so a scripted server
   (testbeds/scripted_server.py, another process) streams 64 tokens 10 ms apart after 20 ms and logs the
   moment each chunk went to its socket, on CLOCK_MONOTONIC as our perf_counter. phasetop's timing
   error is defined against that server's own timing: stamp error = phasetop's arrival stamp of a
   chunk − the server's write of it (every chunk; loopback transit included); ITL error = measured
   gap − written gap. TTFT error (measured TTFT − the server's first write − its request receipt) is
   shown too; it also holds the request's trip to the server. The plain client is measured the same
   way at each rate: its error is the floor the machine sets. The figure is the highest rate at which
   phasetop's stamp error and |ITL error| both stay under 2 ms at p99.
The 1-minute load average is printed beside each part: the machine may be shared.

    .venv/bin/python bench/bench_vs_plain.py [--num-prompts 100] [--rate 10] [--rates 5,10,20,40,80,160]

Prints tables, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from time import perf_counter

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a plain script from anywhere

import httpx  # noqa: E402

from bench.fidelity import errors_ms  # noqa: E402
from tui.core.measure.arrivals import unit_schedule  # noqa: E402
from tui.core.measure.records import RequestTiming  # noqa: E402
from tui.core.measure.stats import summarize  # noqa: E402
from tui.sources.servers.simulator_server import SimulatorProcess  # noqa: E402
from tui.sources.detect import describe_server  # noqa: E402
from tui.sources.http import make_client  # noqa: E402
from tui.sources.workloads.load import LoadDial, LoadRunner, Workload  # noqa: E402
from tui.sources.workloads.prompts import prompt_of  # noqa: E402

ERROR_LIMIT_MS = 2.0
SATURATED_MS = 20.0
"""The rate steps stop once phasetop's stamp error p99 passes this: the client is saturated."""


def load_1m() -> float:
    return os.getloadavg()[0]


def percentiles_ms(values: list[float]) -> dict:
    s = summarize(values)
    return {"p50": s.p50 * 1e3, "p90": s.p90 * 1e3, "p99": s.p99 * 1e3, "n": s.n}


async def run_phasetop(url: str, n: int, rate: float, concurrency: int | None, prompt_tokens: int, max_tokens: int,
                       seed: int) -> dict:
    """phasetop's runner; per request, keyed by the prompt's nonce (to match a server's log)."""
    timings: dict[str, RequestTiming] = {}
    async with make_client(url, max_connections=concurrency or n) as client:
        server = await describe_server(client, "openai", None)
        runner = LoadRunner(client, server, Workload(prompt_tokens, max_tokens, n, seed=seed), LoadDial(rate, concurrency))
        cpu = time.process_time()
        result = await runner.run(on_finished=lambda request, timing: timings.__setitem__(request.prompt.split()[0], timing))
        cpu = time.process_time() - cpu
    done = [r for r in result.requests if r.ok]
    return {
        "ttft": [r.ttft_s for r in done],
        "itl": [gap for r in done for gap in r.itl_s],
        "tokens": sum(r.output_tokens or 0 for r in done),
        "failed": len(result.requests) - len(done),
        "cpu_s": cpu,
        "timings": timings,
    }


async def run_plain(url: str, n: int, rate: float, concurrency: int | None, prompt_tokens: int, max_tokens: int,
                    seed: int) -> dict:
    """The reference, `vllm bench serve`'s way on httpx: same seeded send times, same prompt length, a semaphore."""
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=httpx.Limits(max_connections=None)) as client:
        model = (await client.get("/v1/models")).json()["data"][0]["id"]
        prompts = [(await prompt_of(client, "openai", model, prompt_tokens)).text for _ in range(n)]
        times = [0.0] * n if math.isinf(rate) else [t / rate for t in unit_schedule(n, 1.0, random.Random(seed))]
        gate = asyncio.Semaphore(concurrency or n)
        ttfts: list[float] = []
        on_wire_ttfts: list[float] = []
        itls: list[float] = []
        stamps: dict[str, list[float]] = {}
        sent_at: dict[str, float] = {}
        tokens = 0

        async def one(prompt: str, at_s: float) -> None:
            nonlocal tokens
            await asyncio.sleep(max(0.0, start + at_s - perf_counter()))
            body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True,
                    "stream_options": {"include_usage": True}}
            on_wire: list[float] = []
            arrivals = stamps.setdefault(prompt.split()[0], [])

            async def trace(event: str, info: dict) -> None:
                if event == "http11.send_request_body.started":
                    on_wire.append(perf_counter())

            async with gate:
                sent = last = sent_at[prompt.split()[0]] = perf_counter()
                ttft = None
                async with client.stream("POST", "/v1/completions", json=body, extensions={"trace": trace}) as response:
                    async for line in response.aiter_lines():
                        if not line.startswith("data: ") or line == "data: [DONE]":
                            continue
                        now = perf_counter()
                        chunk = json.loads(line[6:])
                        if chunk.get("choices") and chunk["choices"][0].get("text"):
                            arrivals.append(now)
                            if ttft is None:
                                ttft = now - sent
                            else:
                                itls.append(now - last)
                            last = now
                        elif chunk.get("usage"):
                            tokens += chunk["usage"]["completion_tokens"]
            ttfts.append(ttft)
            on_wire_ttfts.append(ttft - (on_wire[0] - sent))

        cpu = time.process_time()
        start = perf_counter()
        await asyncio.gather(*(one(p, t) for p, t in zip(prompts, times)))
        cpu = time.process_time() - cpu
    return {"ttft": ttfts, "on_wire_ttft": on_wire_ttfts, "itl": itls, "tokens": tokens, "failed": 0, "cpu_s": cpu,
            "stamps": stamps, "sent": sent_at}


def cpu_per_10k(run: dict) -> float:
    return run["cpu_s"] / run["tokens"] * 10_000


def delta(a: dict, b: dict, b_ttft: str = "ttft_ms") -> dict:
    return {"ttft_ms": {q: a["ttft_ms"][q] - b[b_ttft][q] for q in ("p50", "p90", "p99")},
            "itl_ms": {q: a["itl_ms"][q] - b["itl_ms"][q] for q in ("p50", "p90", "p99")}}


async def agreement(url: str, args: argparse.Namespace, n: int, rate: float, concurrency: int | None) -> dict:
    load_before = load_1m()
    rounds = []
    workload = (n, rate, concurrency, args.prompt_tokens, args.max_tokens, args.seed)
    for _ in range(2):
        for name, client in (("phasetop", run_phasetop), ("plain", run_plain)):
            run = await client(url, *workload)
            row = {"client": name, "ttft_ms": percentiles_ms(run["ttft"]), "itl_ms": percentiles_ms(run["itl"]),
                   "tokens": run["tokens"], "failed": run["failed"], "cpu_s_per_10k_tokens": cpu_per_10k(run)}
            if "on_wire_ttft" in run:
                row["on_wire_ttft_ms"] = percentiles_ms(run["on_wire_ttft"])
            rounds.append(row)
    p1, b1, p2, b2 = rounds
    return {
        "workload": {"num_prompts": n, "request_rate": "inf" if math.isinf(rate) else rate, "max_concurrency": concurrency},
        "load_1m": [load_before, load_1m()],
        "rounds": rounds,
        "phasetop_minus_plain": [delta(p1, b1), delta(p2, b2)],
        "phasetop_minus_plain_on_wire": [delta(p1, b1, "on_wire_ttft_ms"), delta(p2, b2, "on_wire_ttft_ms")],
        "phasetop_minus_phasetop": delta(p1, p2),
    }


def phasetop_clock(timings: dict[str, RequestTiming], wall_minus_mono: float) -> tuple[dict, dict]:
    """(arrival stamps, send stamps) on the monotonic clock: t_sent_unix was read right beside the perf_counter stamp."""
    sent = {nonce: t.t_sent_unix - wall_minus_mono for nonce, t in timings.items()}
    return {nonce: [sent[nonce] + offset for offset in t.token_offsets_s] for nonce, t in timings.items()}, sent


def stamp_errors_ms(stamps: dict[str, list[float]], log: list[dict]) -> list[float]:
    """Each chunk's arrival stamp − the server's write of it, both on CLOCK_MONOTONIC, in ms."""
    written = {entry["nonce"]: entry["content_write_ns"] for entry in log}
    return [(stamp - write_ns / 1e9) * 1e3 for nonce, arrived in stamps.items() for stamp, write_ns in zip(arrived, written[nonce])]


def error_row(stamps: dict[str, list[float]], sent: dict[str, float], log: list[dict], run: dict) -> dict:
    """Stamp, |ITL| and TTFT errors (p50, p99, ms) of one client's run against the server's log.

    `stamps`: each chunk's arrival on the monotonic clock; `sent`: where the client's own TTFT clock starts.
    """
    offsets = {nonce: [t - sent[nonce] for t in arrived] for nonce, arrived in stamps.items()}
    ttft_err, itl_err = errors_ms(offsets, log)
    stamp = summarize(stamp_errors_ms(stamps, log))
    itl_abs = summarize([abs(e) for e in itl_err])
    ttft = summarize(ttft_err)
    return {
        "stamp_error_ms": {"p50": stamp.p50, "p99": stamp.p99},
        "itl_abs_error_ms": {"p50": itl_abs.p50, "p99": itl_abs.p99},
        "ttft_error_ms": {"p50": ttft.p50, "p99": ttft.p99},
        "cpu_s_per_10k_tokens": cpu_per_10k(run),
        "within_limit": run["failed"] == 0 and max(stamp.p99, itl_abs.p99) < ERROR_LIMIT_MS,
    }


async def error_against_rate(args: argparse.Namespace) -> list[dict]:
    """Step the rate up on the scripted server, both clients at each rate, until phasetop fails or saturates."""
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "testbeds" / "scripted_server.py"), "--tokens", str(args.script_tokens), "--itl", "0.01", "--ttft", "0.02"],
        stdout=subprocess.PIPE, text=True,
    )
    rows = []
    try:
        url = server.stdout.readline().strip()
        async with httpx.AsyncClient(base_url=url) as admin:
            for rate in args.rates:
                n = max(20, int(rate * args.seconds))
                load_before = load_1m()
                workload = (url, n, rate, None, args.prompt_tokens, args.script_tokens, args.seed)
                wall_minus_mono = time.time() - perf_counter()
                mine = await run_phasetop(*workload)
                plain = await run_plain(*workload)
                log = (await admin.get("/_log")).json()
                rows.append({
                    "rate": rate, "requests": n, "load_1m": [load_before, load_1m()],
                    "phasetop": error_row(*phasetop_clock(mine["timings"], wall_minus_mono), log, mine),
                    "plain": error_row(plain["stamps"], plain["sent"], log, plain),
                })
                if mine["failed"] or rows[-1]["phasetop"]["stamp_error_ms"]["p99"] > SATURATED_MS:
                    break
    finally:
        server.terminate()
        server.wait(10)
    return rows


def print_agreement(agree: dict) -> None:
    w = agree["workload"]
    print(f"agreement on the simulator: {w['num_prompts']} requests, rate {w['request_rate']}, "
          f"concurrency {w['max_concurrency']} (load 1m {agree['load_1m'][0]:.2f} -> {agree['load_1m'][1]:.2f})")
    print(f"{'client':<9} {'TTFT p50':>9} {'p90':>7} {'p99':>7} {'ITL p50':>8} {'p90':>7} {'p99':>7} {'tokens':>7} {'CPU s/10k tok':>13}")
    for r in agree["rounds"]:
        t, i = r["ttft_ms"], r["itl_ms"]
        print(f"{r['client']:<9} {t['p50']:>9.3f} {t['p90']:>7.3f} {t['p99']:>7.3f} {i['p50']:>8.3f} {i['p90']:>7.3f} {i['p99']:>7.3f} "
              f"{r['tokens']:>7} {r['cpu_s_per_10k_tokens']:>13.3f}")
    labels = [("phasetop - plain, round 1", agree["phasetop_minus_plain"][0]),
              ("phasetop - plain, round 2", agree["phasetop_minus_plain"][1]),
              ("  (plain TTFT from its wire)", agree["phasetop_minus_plain_on_wire"][0]),
              ("  (plain TTFT from its wire)", agree["phasetop_minus_plain_on_wire"][1]),
              ("phasetop - phasetop (noise)", agree["phasetop_minus_phasetop"])]
    for label, d in labels:
        t, i = d["ttft_ms"], d["itl_ms"]
        print(f"{label:<29} TTFT {t['p50']:+7.3f} {t['p90']:+7.3f} {t['p99']:+7.3f} ms   ITL {i['p50']:+7.3f} {i['p90']:+7.3f} {i['p99']:+7.3f} ms")
    print()


def print_error_rows(rows: list[dict]) -> None:
    print("timing error against the scripted server's own write times (ms)")
    print(f"{'rate/s':>7} {'reqs':>5} {'client':<9} {'stamp p50':>9} {'p99':>7} {'|ITL| p50':>9} {'p99':>7} {'TTFT p50':>8} {'p99':>7} "
          f"{'CPU s/10k tok':>13} {'load 1m':>13}")
    for r in rows:
        for client in ("phasetop", "plain"):
            e = r[client]
            print(f"{r['rate']:>7g} {r['requests']:>5} {client:<9} {e['stamp_error_ms']['p50']:>9.3f} {e['stamp_error_ms']['p99']:>7.3f} "
                  f"{e['itl_abs_error_ms']['p50']:>9.3f} {e['itl_abs_error_ms']['p99']:>7.3f} "
                  f"{e['ttft_error_ms']['p50']:>8.3f} {e['ttft_error_ms']['p99']:>7.3f} {e['cpu_s_per_10k_tokens']:>13.3f} "
                  f"{r['load_1m'][0]:>6.2f}-{r['load_1m'][1]:<6.2f}{'' if e['within_limit'] else '  over'}")
    passing = [r["rate"] for r in rows if r["phasetop"]["within_limit"]]
    print(f"highest rate with phasetop's stamp and ITL error p99 under {ERROR_LIMIT_MS} ms: {max(passing) if passing else 'none'} req/s")


async def agreements(args: argparse.Namespace) -> list[dict]:
    with SimulatorProcess.start() as sim:
        return [
            await agreement(sim.url, args, args.num_prompts, args.rate, None),
            await agreement(sim.url, args, args.serial_prompts, math.inf, 1),
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-prompts", type=int, default=100, help="requests of each Poisson agreement round")
    parser.add_argument("--serial-prompts", type=int, default=40, help="requests of each one-at-a-time agreement round")
    parser.add_argument("--rate", type=float, default=10.0, help="request rate of the Poisson agreement rounds")
    parser.add_argument("--prompt-tokens", type=int, default=200)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rates", type=lambda text: [float(v) for v in text.split(",")], default=[5, 10, 20, 40, 80, 160])
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each rate step's schedule")
    parser.add_argument("--script-tokens", type=int, default=64)
    args = parser.parse_args()
    agree = asyncio.run(agreements(args))
    rows = asyncio.run(error_against_rate(args))
    for part in agree:
        print_agreement(part)
    print_error_rows(rows)
    passing = [r["rate"] for r in rows if r["phasetop"]["within_limit"]]
    print(json.dumps({"bench_vs_plain": {"agreement": agree, "error_vs_rate": rows,
                                         "max_rate_error_under_2ms": max(passing) if passing else None},
                      "workload": vars(args)}))


if __name__ == "__main__":
    main()
