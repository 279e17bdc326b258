"""How faithfully a streaming client times tokens at 1 to 256 streams, against a server's own write log.

A scripted server (another process on uvloop, pinned to one core where the machine has two) sends every token
at a known time and logs when it wrote each chunk. For each client: TTFT error = client TTFT − the
server's (request arrived → first chunk written); ITL error = client gap − written gap, per token; and
the client's CPU per streamed token (from the first request sent, connections already open, to the
last answer). The clients:

  phasetop        phasetop's own meter in this process, as `phasetop bench` runs it (LocalMeter: aiohttp + orjson,
                  clock on the wire, connections warmed, its loop watched for stalls)
  httpx           one httpx pool (phasetop's transport before issue 12), clock on the wire (trace)
  httpx-sharded   several httpx clients of SHARD connections each, clock on the wire
  httpx-aiohttp   httpx over the httpx-aiohttp transport, clock before the call (no trace there)
  aiohttp         aiohttp directly, stdlib json, clock on the wire (request trace)
  aiohttp-orjson  the same with orjson on the chunk path
  raw             the reference: stdlib asyncio sockets opened first, clock at the write

each on asyncio's loop and on uvloop (`+uvloop`). Every client reads chunks in the same loop: stamp,
split lines, parse the JSON, keep the stamp of each chunk that carries text.

    .venv/bin/python bench/fidelity.py [--streams 1 32 128 256] [--clients phasetop raw …] [--runs 3]

Prints a table per level, the targets beside phasetop's figure and the same run's raw-socket reference,
then one JSON line. Needs the bench extra (`pip install -e '.[bench]'`: httpx-aiohttp, uvloop).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from time import perf_counter_ns
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a plain script from anywhere

import aiohttp  # noqa: E402
import httpx  # noqa: E402
import orjson  # noqa: E402
from sim_emission import pin  # noqa: E402
from testbeds.scripted_server import count_tokens  # noqa: E402
from tui.core.measure.stats import percentile  # noqa: E402
from tui.sources.http import make_client  # noqa: E402
from tui.sources.workloads.prompts import filler_text, make_nonce  # noqa: E402
from tui.sources.meter import LocalMeter  # noqa: E402
from tui.sources.stream import StreamRequest  # noqa: E402

SHARD = 8
"""Connections per httpx client in the sharded pool: few enough that httpcore's per-event pool walk stays short."""
REQUESTS_PER_STREAM = {1: 50, 32: 50, 128: 256, 256: 512}
"""The issue's workload: 50 requests at 1 and 32 streams, two rounds at 128 and at 256."""
TARGETS = {
    "ttft_p50_ms": {1: 0.5, 32: 0.5, 128: 1.0, 256: 2.0},
    "itl_p50_ms": {128: 0.1},
    "cpu_us_per_token": {128: 30.0},
}
Offsets = dict[str, list[float]]
"""Client arrival offsets (s after the clock started) of each text chunk, by the prompt's nonce."""


def prompts(n: int, n_tokens: int) -> list[str]:
    """Prompts of exactly n_tokens by the scripted server's tokenizer, each with its own nonce."""
    out = []
    for _ in range(n):
        nonce = make_nonce()
        out.append(filler_text(nonce, n_tokens - count_tokens(nonce)))
    return out


def body(text: str, max_tokens: int) -> dict:
    return {"model": "scripted-model", "prompt": text, "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True}}


class ChunkReader:
    """The one reading loop of every bare client: stamp first, then split lines and parse."""

    def __init__(self, loads: Callable[[bytes], dict]) -> None:
        self.loads = loads
        self.start_ns = 0
        self.offsets: list[float] = []
        self._pending = b""

    def feed(self, data: bytes) -> bool:
        """Read one chunk of the body; True once the chunked body's last chunk was seen (raw sockets)."""
        stamp = perf_counter_ns()
        lines = (self._pending + data).split(b"\n")
        self._pending = lines.pop()
        ended = False
        for line in lines:
            if line.startswith(b"data: {"):
                choices = self.loads(line[6:]).get("choices")
                if choices and choices[0].get("text"):
                    self.offsets.append((stamp - self.start_ns) / 1e9)
            elif line == b"0\r":
                ended = True
        return ended


class CpuWindow:
    """The client's CPU seconds from the first request sent (connections already open) to the last answer."""

    def __init__(self) -> None:
        self.started = self.seconds = 0.0


async def gated(texts: list[str], streams: int, one: Callable[[str], Awaitable[list[float]]], cpu: CpuWindow) -> Offsets:
    """Every text through `one`, `streams` at a time; the CPU window covers only this."""
    gate = asyncio.Semaphore(streams)
    offsets: Offsets = {}
    cpu.started = time.process_time()

    async def run(text: str) -> None:
        async with gate:
            offsets[text.split()[0]] = await one(text)

    await asyncio.gather(*(run(t) for t in texts))
    cpu.seconds = time.process_time() - cpu.started
    return offsets


async def run_phasetop(url: str, texts: list[str], streams: int, max_tokens: int, loads, cpu: CpuWindow) -> Offsets:
    async with make_client(url, max_connections=streams) as client:
        meter = LocalMeter(client)
        connect_s = await meter.warm_up("/v1/models", connections=streams)

        async def one(text: str) -> list[float]:
            timing = await meter.measure(StreamRequest("openai", "scripted-model", text, max_tokens), connect_s)
            if not timing.ok:
                raise RuntimeError(timing.error)
            return list(timing.token_offsets_s)

        return await gated(texts, streams, one, cpu)


async def _httpx_stream(client: httpx.AsyncClient, text: str, max_tokens: int, loads, wire_clock: bool) -> list[float]:
    reader = ChunkReader(loads)

    async def trace(event: str, info: dict) -> None:
        if event == "http11.send_request_body.started":
            reader.start_ns = perf_counter_ns()

    reader.start_ns = perf_counter_ns()
    extensions = {"trace": trace} if wire_clock else {}
    async with client.stream("POST", "/v1/completions", json=body(text, max_tokens), extensions=extensions) as response:
        async for data in response.aiter_raw():
            reader.feed(data)
    return reader.offsets


async def _warm_httpx(client: httpx.AsyncClient, connections: int) -> None:
    async def one() -> None:
        response = await client.get("/v1/models")
        await response.aclose()

    await asyncio.gather(*(one() for _ in range(connections)))


def _httpx_pool(connections: int) -> httpx.AsyncHTTPTransport:
    return httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections))


async def run_httpx(url: str, texts: list[str], streams: int, max_tokens: int, loads, cpu: CpuWindow) -> Offsets:
    async with httpx.AsyncClient(base_url=url, timeout=60, transport=_httpx_pool(streams)) as client:
        await _warm_httpx(client, streams)
        return await gated(texts, streams, lambda text: _httpx_stream(client, text, max_tokens, loads, True), cpu)


async def run_httpx_sharded(url: str, texts: list[str], streams: int, max_tokens: int, loads, cpu: CpuWindow) -> Offsets:
    shards = [httpx.AsyncClient(base_url=url, timeout=60, transport=_httpx_pool(SHARD)) for _ in range(-(-streams // SHARD))]
    free: asyncio.Queue[httpx.AsyncClient] = asyncio.Queue()
    for shard in shards:
        for _ in range(SHARD):
            free.put_nowait(shard)
    try:
        await asyncio.gather(*(_warm_httpx(shard, SHARD) for shard in shards))

        async def one(text: str) -> list[float]:
            shard = await free.get()  # a shard with a connection to spare
            try:
                return await _httpx_stream(shard, text, max_tokens, loads, True)
            finally:
                free.put_nowait(shard)

        return await gated(texts, streams, one, cpu)
    finally:
        for shard in shards:
            await shard.aclose()


async def run_httpx_aiohttp(url: str, texts: list[str], streams: int, max_tokens: int, loads, cpu: CpuWindow) -> Offsets:
    from httpx_aiohttp import AiohttpTransport

    transport = AiohttpTransport(client=lambda: aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=streams)))
    async with httpx.AsyncClient(base_url=url, timeout=60, transport=transport) as client:
        await _warm_httpx(client, streams)
        return await gated(texts, streams, lambda text: _httpx_stream(client, text, max_tokens, loads, False), cpu)


async def run_aiohttp(url: str, texts: list[str], streams: int, max_tokens: int, loads, cpu: CpuWindow) -> Offsets:
    async def body_going_out(session, context, params) -> None:
        context.trace_request_ctx.start_ns = perf_counter_ns()

    trace = aiohttp.TraceConfig()
    trace.on_request_chunk_sent.append(body_going_out)
    connector = aiohttp.TCPConnector(limit=streams)
    async with aiohttp.ClientSession(url, connector=connector, trace_configs=[trace]) as session:
        async def warm() -> None:
            async with session.get("/v1/models") as response:
                await response.read()

        await asyncio.gather(*(warm() for _ in range(streams)))

        async def one(text: str) -> list[float]:
            reader = ChunkReader(loads)
            payload = json.dumps(body(text, max_tokens)).encode()
            async with session.post("/v1/completions", data=payload, headers={"Content-Type": "application/json"},
                                    trace_request_ctx=reader) as response:
                async for data in response.content.iter_any():
                    reader.feed(data)
            return reader.offsets

        return await gated(texts, streams, one, cpu)


async def run_raw(url: str, texts: list[str], streams: int, max_tokens: int, loads, cpu: CpuWindow) -> Offsets:
    parts = urlsplit(url)
    pool: asyncio.Queue = asyncio.Queue()
    connections = [await asyncio.open_connection(parts.hostname, parts.port) for _ in range(streams)]
    for connection in connections:
        pool.put_nowait(connection)

    async def one(text: str) -> list[float]:
        stream_reader, writer = await pool.get()
        payload = json.dumps(body(text, max_tokens)).encode()
        head = (f"POST /v1/completions HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n").encode()
        reader = ChunkReader(loads)
        reader.start_ns = perf_counter_ns()
        writer.write(head + payload)
        while data := await stream_reader.read(65536):
            if reader.feed(data):
                break
        pool.put_nowait((stream_reader, writer))
        return reader.offsets

    try:
        return await gated(texts, streams, one, cpu)
    finally:
        for _, writer in connections:
            writer.close()


CLIENTS = {
    "phasetop": (run_phasetop, orjson.loads),
    "httpx": (run_httpx, json.loads),
    "httpx-sharded": (run_httpx_sharded, json.loads),
    "httpx-aiohttp": (run_httpx_aiohttp, json.loads),
    "aiohttp": (run_aiohttp, json.loads),
    "aiohttp-orjson": (run_aiohttp, orjson.loads),
    "raw": (run_raw, json.loads),
}


def errors_ms(offsets: Offsets, log: list[dict]) -> tuple[list[float], list[float]]:
    """(TTFT errors, per-token ITL errors) in ms: measured − written, matched to the server's log by nonce."""
    written = {entry["nonce"]: entry for entry in log}
    ttft, itl = [], []
    for nonce, measured in offsets.items():
        entry = written[nonce]
        if len(measured) != len(entry["content_write_ns"]):
            raise RuntimeError(f"{nonce}: {len(measured)} tokens read, {len(entry['content_write_ns'])} written")
        writes = [(t - entry["received_ns"]) / 1e9 for t in entry["content_write_ns"]]
        ttft.append((measured[0] - writes[0]) * 1000)
        itl += [((m1 - m0) - (w1 - w0)) * 1000 for m0, m1, w0, w1 in zip(measured, measured[1:], writes, writes[1:])]
    return ttft, itl


def loop_factory(name: str):
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def run_one(url: str, client: str, loop: str, streams: int, args: argparse.Namespace) -> dict:
    """One client at one level: its figures, from the server's log of this run's requests only."""
    runner, loads = CLIENTS[client]
    texts = prompts(REQUESTS_PER_STREAM.get(streams, 2 * streams), args.prompt_tokens)
    cpu = CpuWindow()
    with asyncio.Runner(loop_factory=loop_factory(loop)) as event_loop:
        offsets = event_loop.run(runner(url, texts, streams, args.tokens, loads, cpu))
    log = httpx.get(url + "/_log/take", timeout=30).json()
    ttft, itl = errors_ms(offsets, log)
    abs_itl = sorted(abs(e) for e in itl)
    tokens = sum(len(v) for v in offsets.values())
    return {
        "client": client + ("+uvloop" if loop == "uvloop" else ""), "streams": streams, "requests": len(offsets),
        "ttft_err_p50_ms": statistics.median(ttft), "ttft_err_p99_ms": percentile(sorted(ttft), 99),
        "itl_abs_err_p50_ms": statistics.median(abs_itl), "itl_abs_err_p99_ms": percentile(abs_itl, 99),
        "cpu_us_per_token": cpu.seconds / tokens * 1e6, "tokens": tokens, "load_1m": os.getloadavg()[0],
    }


def medians(runs: list[dict]) -> dict:
    """The median of each figure over repeated runs of one client at one level."""
    keys = ("ttft_err_p50_ms", "ttft_err_p99_ms", "itl_abs_err_p50_ms", "itl_abs_err_p99_ms", "cpu_us_per_token", "load_1m")
    return runs[0] | {k: statistics.median(r[k] for r in runs) for k in keys} | {"runs": len(runs)}


def table(rows: list[dict]) -> str:
    head = (f"{'client':<23} {'streams':>7} {'TTFT err p50':>12} {'p99':>7} {'|ITL err| p50':>13} {'p99':>7} "
            f"{'CPU µs/tok':>10} {'load':>5}")
    lines = [head]
    for r in rows:
        lines.append(f"{r['client']:<23} {r['streams']:>7} {r['ttft_err_p50_ms']:>12.3f} {r['ttft_err_p99_ms']:>7.2f} "
                     f"{r['itl_abs_err_p50_ms']:>13.3f} {r['itl_abs_err_p99_ms']:>7.2f} {r['cpu_us_per_token']:>10.1f} "
                     f"{r['load_1m']:>5.2f}")
    return "\n".join(lines)


def targets(rows: list[dict], loop: str) -> list[dict]:
    """Each target beside phasetop's figure and the same run's raw-socket figure."""
    suffix = "+uvloop" if loop == "uvloop" else ""
    found = {(r["client"], r["streams"]): r for r in rows}
    checks = []
    names = {"ttft_p50_ms": "ttft_err_p50_ms", "itl_p50_ms": "itl_abs_err_p50_ms", "cpu_us_per_token": "cpu_us_per_token"}
    for target, levels in TARGETS.items():
        for streams, limit in levels.items():
            ours, raw = found.get(("phasetop" + suffix, streams)), found.get(("raw" + suffix, streams))
            if ours is None:
                continue
            key = names[target]
            checks.append({"target": target, "streams": streams, "limit": limit, "phasetop": ours[key],
                           "raw": raw[key] if raw else None, "met": abs(ours[key]) <= limit})
    return checks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 32, 128, 256])
    parser.add_argument("--clients", nargs="+", default=list(CLIENTS), choices=list(CLIENTS))
    parser.add_argument("--loops", nargs="+", default=["asyncio", "uvloop"], choices=["asyncio", "uvloop"])
    parser.add_argument("--runs", type=int, default=1, help="runs of each client at each level; figures are their medians")
    parser.add_argument("--prompt-tokens", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--itl", type=float, default=0.01, help="seconds between the server's tokens")
    parser.add_argument("--ttft", type=float, default=0.02, help="seconds from arrival to the server's first token")
    args = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "testbeds" / "scripted_server.py"), "--tokens", str(args.tokens),
         "--itl", str(args.itl), "--ttft", str(args.ttft), "--uvloop"],
        stdout=subprocess.PIPE, text=True,
    )
    pinned = (os.cpu_count() or 1) > 1 and pin(server.pid, 0) and pin(os.getpid(), 1)
    rows = []
    try:
        url = server.stdout.readline().strip()
        for streams in args.streams:
            for loop in args.loops:
                for client in args.clients:
                    runs = [run_one(url, client, loop, streams, args) for _ in range(args.runs)]
                    rows.append(medians(runs))
                    print(table(rows[-1:]).splitlines()[1], file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait(10)
    print(f"server and client pinned to a core each: {pinned}; {os.cpu_count()} cores; medians of {args.runs} run(s)")
    print(table(rows))
    checks = [c for loop in args.loops for c in targets(rows, loop)]
    if checks:
        print(f"\n{'target':<18} {'streams':>7} {'limit':>6} {'phasetop':>9} {'raw (same run)':>14}  met")
        for c in checks:
            raw = f"{c['raw']:.3f}" if c["raw"] is not None else "-"
            print(f"{c['target']:<18} {c['streams']:>7} {c['limit']:>6} {c['phasetop']:>9.3f} {raw:>14}  {'yes' if c['met'] else 'NO'}")
    print(json.dumps({"fidelity": rows, "targets": checks, "pinned": pinned, "workload": vars(args)}))


if __name__ == "__main__":
    main()
