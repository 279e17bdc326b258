"""`phasetop metrics`: the server's /metrics in canonical names, with rates and quantiles over a window."""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass, field
from datetime import datetime

from tui.cli.commands import COMMANDS
from tui.cli.common import settings_from, stop_on_first_interrupt
from tui.cli.options import add_json_option
from tui.cli.output import EXIT_OK, EXIT_USAGE, CliError, emit_json, note, say
from tui.core.engines.known import titles
from tui.core.fleet.text import num as _num
from tui.core.fleet.text import seconds as _seconds
from tui.core.telemetry.readings import MetricsSnapshot, kv_tokens_text, saturation_text, waiting_text
from tui.core.telemetry.slots import SlotState, slots_line
from tui.core.untrusted import one_line
from tui.sources.errors import ServerRejected, SourceError
from tui.sources.http import client_for
from tui.sources.scrape import MetricsNotExposed, MetricsScraper
from tui.sources.slots import fetch_slots

DOWN_TIMEOUT_S = 300.0
"""How long the server may stay down before `metrics` gives up: a vLLM restart with a large model takes minutes."""
FIRST_RETRY_S = 0.1
"""The first retry after a failed scrape; each next one waits twice as long, up to --interval."""
EXIT_INTERRUPTED = 130

HISTOGRAM_LABELS = (("ttft_s", "TTFT"), ("itl_s", "ITL"), ("e2e_s", "E2E"), ("queue_s", "queue"), ("prefill_s", "prefill"), ("decode_s", "decode"))


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "metrics",
        help=COMMANDS["metrics"],
        description="Scrape the server's Prometheus /metrics and show one set of fields whatever the server calls them "
        f"({titles(joined='and')}'s names, across versions): running, waiting, kv_cache_usage, token "
        "counters, prefix-cache hit rate, latency quantiles, engine_config, and source_names (which raw metric fed "
        "each). Rates and p50/p90/p99 are over the window between two scrapes: the "
        "first scrape is a baseline, so every snapshot shown spans --interval seconds (its `window_s`), "
        "except across a server restart: then the window is the new process's life, or null (no rates) "
        "when the server gives no start time. "
        "--once takes two scrapes --interval apart and shows one snapshot. A quantile that lands in "
        "the first bucket (≤ its bound) or past the last finite one (≥ it) is marked, since it is a "
        "bound, not a value. --json prints one document: the last snapshot's fields at the top and "
        "all snapshots under `snapshots`; --json without --count means --once. For llama.cpp, each "
        "snapshot also holds its /slots (state, context, cached and generated tokens per slot). "
        "A server that goes away after answering once (a restart with new flags) is retried, at most "
        "--interval apart, for up to --down-timeout seconds: the time it was down is kept (`down`, "
        "`server_down_s`, each snapshot's `down_before`), the first snapshot of the new process shows the "
        "restart and its config changes, and --count counts snapshots taken, not failed scrapes. Ctrl-C "
        "ends the run and prints what was measured.",
    )
    parser.add_argument("--url", help="server base URL (default: settings, else http://127.0.0.1:8000)")
    parser.add_argument("--timeout", type=float, dest="timeout_s", metavar="S", help="longest wait for an answer, seconds (default 30)")
    how_many = parser.add_mutually_exclusive_group()
    how_many.add_argument("--once", action="store_true", help="one snapshot over one --interval window")
    how_many.add_argument("--count", type=int, metavar="N", help="N snapshots, one every --interval (default: until interrupted)")
    parser.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between scrapes, the window (default 1)")
    parser.add_argument("--down-timeout", type=float, default=DOWN_TIMEOUT_S, dest="down_timeout_s", metavar="S",
                        help=f"give up when the server has been down this long, seconds (default {DOWN_TIMEOUT_S:.0f})")
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        raise CliError("--interval must be > 0", EXIT_USAGE)
    if args.count is not None and args.count < 1:
        raise CliError("--count must be ≥ 1", EXIT_USAGE)
    if not args.down_timeout_s > 0:
        raise CliError("--down-timeout must be > 0", EXIT_USAGE)
    count = 1 if args.once or (args.json and args.count is None) else args.count
    settings = settings_from(args)
    watch = Watch(count)
    # asyncio's own loop: this command reads no token stream (tui.sources.loop is for those).
    failure = asyncio.run(_watch(settings, args.interval, args.down_timeout_s, args.json, watch))
    if args.json and watch.answered:
        emit_json(watch.to_json(settings.url, failure))
    if failure is not None:
        raise CliError(failure)
    if watch.interrupted:
        if count is not None:
            note(f"phasetop metrics: interrupted after {len(watch.snapshots)} of {count} snapshots")
            return EXIT_INTERRUPTED
        note(f"phasetop metrics: stopped after {len(watch.snapshots)} snapshots")
    return EXIT_OK


@dataclass
class DownPeriod:
    """A stretch of failed scrapes after the server had answered: since the first failure until the next answer."""

    since_unix: float
    since_mono: float
    reason: str
    """The latest failure, one line (its URL and the server's words, never the key)."""
    failed_scrapes: int = 1
    until_unix: float | None = None
    """When the server answered again; None while it is (or stayed) down."""
    until_mono: float | None = None
    last_failure_mono: float | None = None

    def down_s(self) -> float:
        """Seconds down: until the server answered again, or, while it has not, until the latest failed scrape."""
        end = self.until_mono if self.until_mono is not None else (self.last_failure_mono or self.since_mono)
        return max(0.0, end - self.since_mono)

    def to_json(self) -> dict:
        return {"since_unix": self.since_unix, "until_unix": self.until_unix, "down_s": self.down_s(),
                "failed_scrapes": self.failed_scrapes, "reason": self.reason}


@dataclass
class Watch:
    """What one `metrics` run measured, kept as it goes so a failure or Ctrl-C can still print it all."""

    count: int | None
    answered: bool = False
    """The server answered at least once (the baseline); before that a failure is the whole story."""
    snapshots: list[tuple[MetricsSnapshot, list[SlotState] | None, DownPeriod | None]] = field(default_factory=list)
    """Each snapshot, its llama.cpp slots, and the down period it ended (None when the scrape before answered)."""
    down: list[DownPeriod] = field(default_factory=list)
    interrupted: bool = False

    @property
    def done(self) -> bool:
        return self.count is not None and len(self.snapshots) >= self.count

    def to_json(self, url: str, error: str | None) -> dict:
        rows = [{**_json(s, slots), "down_before": d.to_json() if d else None} for s, slots, d in self.snapshots]
        last = rows[-1] if rows else {}
        return {
            **last,
            "url": url,
            "snapshots": rows,
            "down": [d.to_json() for d in self.down],
            "server_down_s": sum(d.down_s() for d in self.down),
            "error": error,
            "interrupted": self.interrupted,
        }


def _json(snapshot: MetricsSnapshot, slots: list[SlotState] | None) -> dict:
    return {**snapshot.to_json(), "slots": [s.to_json() for s in slots] if slots is not None else None}


async def _watch(settings, interval_s: float, down_timeout_s: float, as_json: bool, watch: Watch) -> str | None:
    """Run the scrapes until done, given up or interrupted; the reason it gave up, or None."""
    task = asyncio.ensure_future(_collect(settings, interval_s, down_timeout_s, as_json, watch))

    def stop() -> None:
        watch.interrupted = True
        task.cancel()

    with stop_on_first_interrupt(stop):
        try:
            await task
        except asyncio.CancelledError:
            if not watch.interrupted:
                raise
        except CliError as error:
            if not watch.answered:
                raise
            return str(error)
    return None


def _is_down(error: SourceError) -> bool:
    """A failure that a restart looks like: nothing listens, no answer, a cut answer, a proxy's 5xx.

    Not down: an answer that says this server has no metrics, or refuses us (a 4xx, e.g. a new API key).
    """
    if isinstance(error, MetricsNotExposed):
        return False
    return not (isinstance(error, ServerRejected) and error.status < 500)


async def _collect(settings, interval_s: float, down_timeout_s: float, as_json: bool, watch: Watch) -> None:
    """A baseline scrape, then windowed snapshots until `watch` is done, riding through the server going away.

    Raises CliError when the first scrape fails (the server never answered), on a failure that is not
    the server being down, or once it has been down for down_timeout_s.
    """
    async with client_for(settings) as client:
        scraper = MetricsScraper(client)
        try:
            baseline = await scraper.read()
        except SourceError as error:
            raise CliError(str(error)) from None
        watch.answered = True
        if baseline.engine is None:
            note(f"{settings.url}/metrics: no known LLM-server metric names ({titles()})")
        down: DownPeriod | None = None
        wait_s = interval_s
        while not watch.done:
            await asyncio.sleep(wait_s)
            try:
                snapshot = await scraper.read()
                slots = await fetch_slots(client) if snapshot.engine == "llamacpp" else None
            except SourceError as error:
                if not _is_down(error):
                    raise CliError(str(error)) from None
                down = _went_down(down, error, watch, as_json, interval_s)
                if down.down_s() >= down_timeout_s:
                    raise CliError(
                        f"server down for {down.down_s():.0f} s (since {_clock(down.since_unix)}; {down.reason}); "
                        f"gave up after {len(watch.snapshots)} snapshots (--down-timeout {down_timeout_s:g})"
                    ) from None
                wait_s = min(interval_s, FIRST_RETRY_S * 2 ** (down.failed_scrapes - 1))
                continue
            if down is not None:
                # It ended when the answer came (the snapshot's stamp), not after /v1/models was re-read.
                down.until_unix = snapshot.t_unix
                down.until_mono = time.monotonic() - max(0.0, time.time() - snapshot.t_unix)
                _say(f"server back after {down.down_s():.1f} s ({down.failed_scrapes} failed scrapes)", as_json)
            watch.snapshots.append((snapshot, slots, down))
            if not as_json:
                say(format_snapshot(snapshot) + (f"\n  {slots_line(slots)}" if slots else ""))
            down, wait_s = None, interval_s


def _went_down(down: DownPeriod | None, error: SourceError, watch: Watch, as_json: bool, interval_s: float) -> DownPeriod:
    """Start a down period at this failure, or count it into the one under way."""
    reason = one_line(str(error))
    if down is not None:
        down.failed_scrapes += 1
        down.reason = reason
        down.last_failure_mono = time.monotonic()
        return down
    down = DownPeriod(since_unix=time.time(), since_mono=time.monotonic(), reason=reason)
    watch.down.append(down)
    _say(f"server down since {_clock(down.since_unix)}: {reason} (retrying, at most {interval_s:g} s apart)", as_json)
    return down


def _say(line: str, as_json: bool) -> None:
    """Down and back go with the snapshots on stdout; under --json, stdout holds the document only."""
    if as_json:
        note(f"metrics: {line}")
    else:
        say(line)


def _clock(t_unix: float) -> str:
    return datetime.fromtimestamp(t_unix).strftime("%H:%M:%S")


def format_snapshot(s: MetricsSnapshot) -> str:
    """A compact block for a person: one line of state, one of rates, one per histogram."""
    window = f"over {s.window_s:.1f} s" if s.window_s else "since start"
    lines = [f"{s.engine or 'unknown server'} metrics {window}"]
    kv_pct = s.kv_cache_usage * 100 if s.kv_cache_usage is not None else None
    kv = _num(kv_pct, ".1f" if kv_pct is not None and kv_pct < 10 else ".0f", "%")
    kv_tokens = kv_tokens_text(s)
    lines.append(f"  running {_num(s.running)}  waiting {waiting_text(s)}  KV {kv}" + (f" ({kv_tokens})" if kv_tokens else ""))
    if s.saturated:
        lines.append(f"  {saturation_text(s)}")
    hit = _num(s.prefix_cache_hit_rate * 100 if s.prefix_cache_hit_rate is not None else None, ".0f", "%")
    lines.append(
        f"  prompt {_num(s.prompt_tok_s, ',.0f')} tok/s  generation {_num(s.generation_tok_s, ',.1f')} tok/s"
        f"  prefix hits {hit}  preemptions {_num(s.preemptions_total)} (+{_num(s.preemptions_per_s, '.2f')}/s)"
    )
    if s.est_read_gbs is not None:
        lines.append(f"  memory reads {s.est_read_gbs:,.1f} GB/s per GPU (vLLM estimate, from the model's shape)")
    if s.speculation is not None:
        lines.append(f"  {s.speculation.line()}")
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
        # Keys and values are the server's own label text: one line each, no control characters.
        changes = ", ".join(f"{one_line(k, 60)} {one_line(str(o), 60)}→{one_line(str(n), 60)}"
                            for k, (o, n) in s.restart.config_changes.items()) or "config unchanged"
        lines.append(f"  server restarted ({'; '.join(s.restart.reasons)}): {changes}")
    return "\n".join(lines)
