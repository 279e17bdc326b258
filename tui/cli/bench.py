"""`phasetop bench`: load like `vllm bench serve` (gamma arrivals, a concurrency cap) and its figures."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
from pathlib import Path

from tui.cli.commands import COMMANDS
from tui.cli.common import (
    EXIT_INTERRUPTED,
    base_url,
    check_url,
    check_writable,
    meters,
    note_short_answers,
    settings_from,
    stop_on_first_interrupt,
)
from tui.cli.options import add_json_option, add_meter_option, add_server_options
from tui.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError, emit_json, note, say
from tui.cli.runs_common import add_runs_options, save_run_from_cli
from tui.config import Settings
from tui.core.measure.delivery import burst_line
from tui.core.measure.records import chunking_line
from tui.core.measure.load_steps import LoadProgress
from tui.core.untrusted import redact_all
from tui.runs_store import write_atomic
from tui.sources import loop
from tui.sources.detect import ServerInfo, describe_configured
from tui.sources.errors import SourceError
from tui.sources.http import client_for
from tui.sources.workloads.load import LoadDial, LoadResult, LoadRunner, Workload
from tui.sources.guard import guard_for
from tui.workflows.measure import LoadMeasured, measure_load

DEFAULT_PROMPT_TOKENS = 1024
DEFAULT_MAX_TOKENS = 128
"""`vllm bench serve`'s random dataset defaults (input 1024, output 128), so runs compare."""
PROGRESS_EVERY_S = 0.25
"""A terminal's progress line is redrawn this often."""
PROGRESS_LOG_EVERY_S = 5.0
"""Into a file or pipe, a progress line is written this often instead (no carriage returns there)."""
INTERRUPTED = "interrupted"
"""The reason a run stopped by Ctrl-C gives (`LoadResult.aborted`)."""
MAX_IN_FLIGHT = 512
"""Without --max-concurrency, at most this many requests are in flight, one connection each (within the
usual limit of 1,024 open files); later arrivals wait their turn in order, unmeasured, rather than in
httpx's pool, whose timeout would fail them. vLLM's client has no such cap."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help=COMMANDS["bench"],
        description="Send N streamed requests on a Poisson (or gamma) arrival schedule, at most C at a time, "
        "and report the figures `vllm bench serve` reports, with the same definitions. Progress goes to stderr.",
    )
    add_server_options(parser)
    parser.add_argument("--num-prompts", type=int, required=True, metavar="N", help="requests to send")
    parser.add_argument("--request-rate", type=float, default=math.inf, metavar="R|inf",
                        help="requests a second on average; inf (the default) sends all at once")
    parser.add_argument("--burstiness", type=float, default=1.0, metavar="B",
                        help="gamma shape of the gaps: 1 is Poisson (default), below 1 burstier, above 1 more even")
    parser.add_argument("--max-concurrency", type=int, metavar="C", help="most requests in flight at once (default: no limit)")
    parser.add_argument("--prompt-tokens", type=int, default=DEFAULT_PROMPT_TOKENS, metavar="N",
                        help=f"prompt length, each with a unique opening so prefix caching cannot help (default {DEFAULT_PROMPT_TOKENS})")
    parser.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS, metavar="K",
                        help=f"tokens each request generates (default {DEFAULT_MAX_TOKENS})")
    parser.add_argument("--slo-ttft-ms", type=float, metavar="X", help="goodput counts requests with TTFT at most X ms")
    parser.add_argument("--slo-tpot-ms", type=float, metavar="Y", help="goodput counts requests with TPOT at most Y ms")
    parser.add_argument("--seed", type=int, help="seed of the arrival schedule (default: a random one, reported)")
    parser.add_argument("--chat", action="store_true", help="use the chat endpoint instead of plain completion")
    parser.add_argument("--save", metavar="FILE", help="also write the JSON document to FILE (atomically)")
    add_meter_option(parser)
    add_json_option(parser)
    add_runs_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    _check(args, settings)
    server, measured = loop.run(_bench(settings, args))
    requests, figures, result = measured.requests, measured.figures, measured.result
    # vLLM's figures stay as vLLM counts them, so they compare; the requests behind them are marked.
    delivery = burst_line(requests, consequence="included in the figures above, marked in requests[].burst")
    error = _failure(result, figures)
    document = redact_all({
        "server": server.to_json(),
        "params": _params(args, result.seed),
        "started_unix": result.started_unix,
        "figures": figures,
        "peak_in_flight": result.peak_in_flight,
        "bursts": sum(1 for r in requests if r.burst),
        "bursts_note": delivery,
        "chunking_note": chunking_line(requests),
        "error": error,
        "requests": [r.to_json() for r in requests],
    })
    if args.json:
        emit_json(document)
    else:
        say(_table(server, args, figures))
    if delivery:
        note(f"bench: {delivery}")
    if chunking := chunking_line(requests):
        note(f"bench: {chunking}")
    if measured.run is not None:
        save_run_from_cli(args, settings, measured.run)
    if args.save:
        try:
            write_atomic(Path(args.save), json.dumps(document, indent=2) + "\n")
        except OSError as error:
            raise CliError(f"cannot write {args.save}: {error.strerror or error}", EXIT_FAILED) from None
    if error:  # after the figures and the saves: Ctrl-C keeps what was measured
        raise CliError(error, EXIT_INTERRUPTED if result.aborted == INTERRUPTED else EXIT_FAILED)
    note_short_answers("bench", server.kind, requests, args.max_tokens)
    return EXIT_OK


def _check(args: argparse.Namespace, settings: Settings) -> None:
    check_url(settings.url)
    if args.save:
        check_writable(Path(args.save), "--save")
    if args.num_prompts < 1:
        raise CliError("--num-prompts must be at least 1", EXIT_USAGE)
    if not args.request_rate > 0:
        raise CliError("--request-rate must be above 0 (or inf)", EXIT_USAGE)
    if not args.burstiness > 0:
        raise CliError("--burstiness must be above 0", EXIT_USAGE)
    if args.max_concurrency is not None and args.max_concurrency < 1:
        raise CliError("--max-concurrency must be at least 1", EXIT_USAGE)
    if args.prompt_tokens < 1 or args.max_tokens < 1:
        raise CliError("--prompt-tokens and --max-tokens must be at least 1", EXIT_USAGE)
    for flag, value in (("--slo-ttft-ms", args.slo_ttft_ms), ("--slo-tpot-ms", args.slo_tpot_ms)):
        if value is not None and not value > 0:
            raise CliError(f"{flag} must be above 0", EXIT_USAGE)


async def _bench(settings: Settings, args: argparse.Namespace) -> tuple[ServerInfo, LoadMeasured]:
    """Detect the server, run the load with a progress line on stderr."""
    in_flight = min(args.max_concurrency or MAX_IN_FLIGHT, args.num_prompts)
    async with client_for(settings, base_url(settings.url), in_flight) as client:
        try:
            server = await describe_configured(client, settings.api, settings.model)
            guard = await guard_for(client, server, settings.bandwidth_gbs)
            workload = Workload(args.prompt_tokens, args.max_tokens, args.num_prompts, args.burstiness, args.chat,
                                settings.exact_length, args.seed)
            with meters(settings, "bench", in_flight) as meter_for:
                runner = LoadRunner(client, server, workload, LoadDial(args.request_rate, in_flight), meter_for(client))
                progress = asyncio.create_task(_show_progress(runner))
                try:
                    with stop_on_first_interrupt(lambda: _interrupt(runner)):
                        measured = await measure_load(runner, _params(args, runner.seed), guard,
                                                      (_seconds(args.slo_ttft_ms), _seconds(args.slo_tpot_ms)))
                finally:
                    progress.cancel()
        except SourceError as error:
            raise CliError(str(error)) from None
    _progress_done(runner.progress())
    return server, measured


def _interrupt(runner: LoadRunner) -> None:
    """Ctrl-C: send nothing more; the requests in flight finish and everything measured is reported."""
    runner.stop(reason=INTERRUPTED)
    note(f"bench: stopping; waiting for {runner.progress().in_flight} requests in flight (Ctrl-C again to abandon them)")


async def _show_progress(runner: LoadRunner) -> None:
    """Redraw one line on a terminal's stderr; into a file, write a line now and then. Never stdout."""
    tty = sys.stderr.isatty()
    every = PROGRESS_EVERY_S if tty else PROGRESS_LOG_EVERY_S
    while True:
        await asyncio.sleep(every)
        line = _progress_line(runner.progress())
        if tty:
            sys.stderr.write(f"\r\x1b[2K{line}")
            sys.stderr.flush()
        else:
            note(line)


def _progress_done(progress: LoadProgress) -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[2K")
    note(_progress_line(progress))


def _progress_line(p: LoadProgress) -> str:
    failed = f", {p.failed} failed" if p.failed else ""
    waiting = f", {p.waiting} waiting" if p.waiting else ""
    return (f"bench: {p.finished}/{p.planned} done{failed}, {p.in_flight} in flight{waiting}, "
            f"{p.elapsed_s:.1f} s, {p.recent_rps:.2f} req/s")


def _failure(result: LoadResult, figures: dict) -> str | None:
    """One line when the run is not a clean success: interrupted, the server went away, or requests failed."""
    if result.aborted:
        return f"{result.aborted} ({figures['completed']} of {len(result.requests)} sent requests finished; reported above)"
    failed = [r for r in result.requests if not r.ok]
    if failed:
        return f"{len(failed)} of {len(result.requests)} requests failed; the first: {failed[0].error}"
    if not figures["completed"]:
        return "no request produced a token"
    return None


def _params(args: argparse.Namespace, seed: int) -> dict:
    """The flags that shaped the workload, for the saved run (never the key, never settings wholesale)."""
    return {
        "num_prompts": args.num_prompts,
        "request_rate": "inf" if math.isinf(args.request_rate) else args.request_rate,  # as vLLM's result JSON
        "burstiness": args.burstiness,
        "max_concurrency": args.max_concurrency,
        "prompt_tokens": args.prompt_tokens,
        "max_tokens": args.max_tokens,
        "slo_ttft_ms": args.slo_ttft_ms,
        "slo_tpot_ms": args.slo_tpot_ms,
        "seed": seed,
        "chat": args.chat,
    }


def _seconds(ms: float | None) -> float | None:
    return ms / 1000 if ms is not None else None


def _table(server: ServerInfo, args: argparse.Namespace, f: dict) -> str:
    """`vllm bench serve`'s result block, line for line where the figure exists here."""
    rows: list[tuple[str, str] | str] = [
        " Serving Benchmark Result ",
        ("Successful requests:", str(f["completed"])),
        ("Failed requests:", str(f["failed"])),
    ]
    if args.max_concurrency is not None:
        rows.append(("Maximum request concurrency:", str(args.max_concurrency)))
    if not math.isinf(args.request_rate):
        rows.append(("Request rate configured (RPS):", f"{args.request_rate:.2f}"))
    estimated = "~" if f["tokens_estimated"] else ""
    rows += [
        ("Benchmark duration (s):", f"{f['duration_s']:.2f}"),
        ("Total input tokens:", f"{estimated}{f['total_input_tokens']}"),
        ("Total generated tokens:", f"{estimated}{f['total_output_tokens']}"),
        ("Request throughput (req/s):", _num(f["request_throughput"])),
    ]
    if f["request_goodput"] is not None:
        rows.append(("Request goodput (req/s):", _num(f["request_goodput"])))
    rows += [
        ("Output token throughput (tok/s):", _num(f["output_throughput"])),
        ("Peak concurrent requests:", str(f["peak_concurrent_requests"])),
        ("Total token throughput (tok/s):", _num(f["total_token_throughput"])),
    ]
    for key, title, short in (
        ("ttft_s", "Time to First Token", "TTFT"),
        ("tpot_s", "Time per Output Token (excl. 1st token)", "TPOT"),
        ("itl_s", "Inter-token Latency", "ITL"),
        ("e2el_s", "End-to-end Latency", "E2EL"),
    ):
        summary = f[key]
        rows.append(title)
        for stat, label in (("mean", "Mean"), ("p50", "Median"), ("p90", "P90"), ("p99", "P99")):
            value = summary[stat]
            rows.append((f"{label} {short} (ms):", _num(value * 1000 if value is not None else None)))
    version = f" {server.version}" if server.version else ""
    lines = [f"{server.kind}{version} at {server.url}, model {server.model}"]
    for row in rows:
        if isinstance(row, str):
            lines.append(f"{row:{'=' if row.startswith(' ') else '-'}^50}")
        else:
            lines.append(f"{row[0]:<40} {row[1]:<10}")
    lines.append("=" * 50)
    if estimated:
        lines.append("~ token counts estimated by the client (the server gave no usage)")
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
