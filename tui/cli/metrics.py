"""`phasetop metrics`: the server's /metrics in canonical names, with rates and quantiles over a window."""

from __future__ import annotations

import argparse
import asyncio

from tui.cli.common import add_json_option, settings_from
from tui.cli.output import EXIT_OK, EXIT_USAGE, CliError, emit_json, note
from tui.core.slots import SlotState, slots_line
from tui.core.telemetry import MetricsSnapshot
from tui.sources.errors import SourceError
from tui.sources.http import make_client
from tui.sources.scrape import MetricsScraper
from tui.sources.slots import fetch_slots

HISTOGRAM_LABELS = (("ttft_s", "TTFT"), ("itl_s", "ITL"), ("e2e_s", "E2E"), ("queue_s", "queue"), ("prefill_s", "prefill"), ("decode_s", "decode"))


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "metrics",
        help="the server's /metrics: running, waiting, KV usage, token rates, latency quantiles",
        description="Scrape the server's Prometheus /metrics and show SPEC's canonical fields (vLLM, SGLang, "
        "llama.cpp, TGI names). Rates and p50/p90/p99 are over the window between two scrapes: the "
        "first scrape is a baseline, so every snapshot shown spans --interval seconds (its `window_s`), "
        "except across a server restart: then the window is the new process's life, or null (no rates) "
        "when the server gives no start time. "
        "--once takes two scrapes --interval apart and shows one snapshot. A quantile that lands in "
        "the first bucket (≤ its bound) or past the last finite one (≥ it) is marked, since it is a "
        "bound, not a value. --json prints one document: the last snapshot's fields at the top and "
        "all snapshots under `snapshots`; --json without --count means --once. For llama.cpp, each "
        "snapshot also holds its /slots (state, context, cached and generated tokens per slot).",
    )
    parser.add_argument("--url", help="server base URL (default: settings, else http://127.0.0.1:8000)")
    parser.add_argument("--timeout", type=float, dest="timeout_s", metavar="S", help="longest wait for an answer, seconds (default 30)")
    how_many = parser.add_mutually_exclusive_group()
    how_many.add_argument("--once", action="store_true", help="one snapshot over one --interval window")
    how_many.add_argument("--count", type=int, metavar="N", help="N snapshots, one every --interval (default: until interrupted)")
    parser.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between scrapes, the window (default 1)")
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        raise CliError("--interval must be > 0", EXIT_USAGE)
    if args.count is not None and args.count < 1:
        raise CliError("--count must be ≥ 1", EXIT_USAGE)
    count = 1 if args.once or (args.json and args.count is None) else args.count
    settings = settings_from(args)
    snapshots = asyncio.run(_collect(settings, args.interval, count, args.json))
    if args.json:
        emit_json({**_json(*snapshots[-1]), "url": settings.url, "snapshots": [_json(*s) for s in snapshots]})
    return EXIT_OK


def _json(snapshot: MetricsSnapshot, slots: list[SlotState] | None) -> dict:
    return {**snapshot.to_json(), "slots": [s.to_json() for s in slots] if slots is not None else None}


async def _collect(settings, interval_s: float, count: int | None, as_json: bool) -> list[tuple[MetricsSnapshot, list[SlotState] | None]]:
    """A baseline scrape, then count windowed snapshots, with llama.cpp's /slots (printed as they come unless JSON)."""
    collected: list[tuple[MetricsSnapshot, list[SlotState] | None]] = []
    async with make_client(settings.url, settings.api_key, timeout_s=settings.timeout_s) as client:
        scraper = MetricsScraper(client)
        try:
            baseline = await scraper.read()
            if baseline.engine is None:
                note(f"{settings.url}/metrics: no known LLM-server metric names (vLLM, SGLang, llama.cpp, TGI)")
            async for snapshot in _after(scraper, interval_s, count):
                slots = await fetch_slots(client) if snapshot.engine == "llamacpp" else None
                collected.append((snapshot, slots))
                if not as_json:
                    print(format_snapshot(snapshot) + (f"\n  {slots_line(slots)}" if slots else ""), flush=True)
        except SourceError as error:
            raise CliError(str(error)) from None
    return collected


async def _after(scraper: MetricsScraper, interval_s: float, count: int | None):
    n = 0
    while count is None or n < count:
        await asyncio.sleep(interval_s)
        yield await scraper.read()
        n += 1


def _num(value: float | None, spec: str = ".0f", unit: str = "") -> str:
    return "–" if value is None else f"{value:{spec}}{unit}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value * 1e3:.0f} ms" if value < 1 else f"{value:.2f} s"


def format_snapshot(s: MetricsSnapshot) -> str:
    """A compact block for a person: one line of state, one of rates, one per histogram."""
    window = f"over {s.window_s:.1f} s" if s.window_s else "since start"
    lines = [f"{s.engine or 'unknown server'} metrics {window}"]
    kv_pct = s.kv_cache_usage * 100 if s.kv_cache_usage is not None else None
    kv = _num(kv_pct, ".1f" if kv_pct is not None and kv_pct < 10 else ".0f", "%")
    state = f"  running {_num(s.running)}  waiting {_num(s.waiting)}  KV {kv}"
    if s.saturated:
        state += "  SATURATED (waiting while the KV pool is full)"
    lines.append(state)
    hit = _num(s.prefix_cache_hit_rate * 100 if s.prefix_cache_hit_rate is not None else None, ".0f", "%")
    lines.append(
        f"  prompt {_num(s.prompt_tok_s, ',.0f')} tok/s  generation {_num(s.generation_tok_s, ',.1f')} tok/s"
        f"  prefix hits {hit}  preemptions {_num(s.preemptions_total)} (+{_num(s.preemptions_per_s, '.2f')}/s)"
    )
    for key, label in HISTOGRAM_LABELS:
        q = s.histograms.get(key)
        if q is None:
            continue
        if not q.n:
            lines.append(f"  {label:<8} no observations in the window")
            continue
        cells = []
        for name in ("p50", "p90", "p99"):
            edge = q.edges.get(name)
            if edge == "first":
                cells.append(f"{name} ≤{_seconds(q.first_le)}")
            elif edge == "last":
                cells.append(f"{name} ≥{_seconds(q.last_le)}")
            else:
                cells.append(f"{name} {_seconds(getattr(q, name))}")
        lines.append(f"  {label:<8} {'  '.join(cells)}  (n={q.n:.0f})")
    if s.restart:
        changes = ", ".join(f"{k} {o}→{n}" for k, (o, n) in s.restart.config_changes.items()) or "config unchanged"
        lines.append(f"  server restarted ({'; '.join(s.restart.reasons)}): {changes}")
    return "\n".join(lines)
