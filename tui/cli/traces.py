"""`phasetop traces`: every request the servers served, from their OpenTelemetry spans, split into queue, prefill
and decode."""

from __future__ import annotations

import argparse
import asyncio
import time
from datetime import datetime

from tui.cli.commands import COMMANDS
from tui.cli.common import settings_from, stop_on_first_interrupt
from tui.cli.options import add_json_option, whole_number
from tui.cli.output import EXIT_OK, EXIT_USAGE, CliError, emit_json, note, say
from tui.cli.runs_common import add_runs_options, runs_dir_from, save_run_from_cli
from tui.core.telemetry.otlp_spans import SpanBatch
from tui.core.telemetry.served import (MAX_RECORDS, PHASES, ServedRequest, ServerSpan, TraceWindow, match_sent, not_counted,
                                      refused_json, refused_line, served_summary)
from tui.core.view.traffic import traffic_run
from tui.runs_store import completion_ids_since
from tui.net import url_of
from tui.sources.otlp_receiver import DEFAULT_PORT, TRACES_PATH, TraceReceiver, listen_address

SOURCE = "phasetop traces"
PHASE_LABELS = {"queue_s": "queue", "prefill_s": "prefill", "decode_s": "decode", "ttft_s": "TTFT", "e2e_s": "E2E",
                "unaccounted_s": "outside"}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "traces",
        help=COMMANDS["traces"],
        description="An OTLP/HTTP receiver (protobuf, POST /v1/traces) for vLLM's per-request spans: start vLLM with "
        "--otlp-traces-endpoint http://HOST:PORT/v1/traces and OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf "
        "(vLLM's default is gRPC, which this receiver does not speak), or `phasetop sim --otlp-traces-endpoint`. "
        "Prints one line per served request as its span arrives (its queue, prefill and decode, TTFT and E2E as the "
        "server timed them, its token counts, its sender), then a summary: p50/p90/p99 of each phase, exact per "
        "request. vLLM's E2E also holds its API server's own time, shown as `outside`. A request phasetop itself "
        "sent (a run probe, bench or the UI saved while this listened) is marked by its completion id. "
        "--json prints one document at the end: the records, vLLM's start-up spans, and what was refused or "
        "dropped; its `refused` counts, by reason, the request spans whose times no request could have (stamped in "
        "the future, before 2020, or lasting over a day: a sender's broken clock), kept out. Bounded: the newest "
        "--max-records requests received in the last 10 minutes (by phasetop's clock) are kept, the rest counted. "
        "What was received is saved as a run of kind traffic (unless --no-save), to compare like any other.",
    )
    parser.add_argument("--otlp", required=True, metavar="[HOST:]PORT",
                        help=f"where to listen: a port on 127.0.0.1, or HOST:PORT (0.0.0.0:{DEFAULT_PORT} for every "
                        f"interface; {DEFAULT_PORT} is OTLP/HTTP's port; 0 picks a free one)")
    parser.add_argument("--duration", type=float, metavar="S", dest="duration_s",
                        help="stop after S seconds (default: until Ctrl-C)")
    parser.add_argument("--max-records", type=whole_number(1, 1_000_000, "record count"), default=MAX_RECORDS,
                        metavar="N", help=f"most requests kept (default {MAX_RECORDS:,}); older ones are counted, not kept")
    add_runs_options(parser)
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.duration_s is not None and not args.duration_s > 0:
        raise CliError("--duration must be > 0", EXIT_USAGE)
    try:
        host, port = listen_address(args.otlp)
    except ValueError as error:
        raise CliError(f"--otlp {error}", EXIT_USAGE) from None
    settings = settings_from(args)
    try:
        sock = TraceReceiver.bind(args.otlp)
    except OSError as error:
        raise CliError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    window = TraceWindow(max_records=args.max_records)
    receiver = TraceReceiver(window, on_batch=None if args.json else _print_batch)
    endpoint = url_of(sock) + TRACES_PATH
    started_unix, started = time.time(), time.monotonic()
    interrupted = asyncio.run(_receive(receiver, sock, args.duration_s, endpoint))
    listened_s = time.monotonic() - started
    records = match_sent(window.records, completion_ids_since(runs_dir_from(args, settings), started_unix))
    if args.json:
        emit_json({
            "otlp_endpoint": endpoint,
            "listened_s": listened_s,
            "interrupted": interrupted,
            "records": [r.to_json() for r in records],
            "server_spans": [s.to_json() for s in window.server_spans],
            "summary": served_summary(records),
            "counts": window.tally.to_json(),
            "last_refusal": receiver.last_refusal,
            "refused": refused_json(window.tally),
        })
    else:
        say(summary_text(records, list(window.server_spans), receiver, listened_s))
    if records:
        save_run_from_cli(args, settings, traffic_run(records, SOURCE, endpoint))
    return EXIT_OK


async def _receive(receiver: TraceReceiver, sock, duration_s: float | None, endpoint: str) -> bool:
    """Serve until the duration ends or Ctrl-C; whether it was Ctrl-C."""
    stopped_by_hand = False

    def interrupt() -> None:
        nonlocal stopped_by_hand
        stopped_by_hand = True
        receiver.stop()

    def ready() -> None:
        until = f"for {duration_s:g} s" if duration_s else "until Ctrl-C"
        note(f"phasetop traces: receiving OTLP/HTTP protobuf spans at {endpoint} {until}")

    with stop_on_first_interrupt(interrupt):
        if duration_s:
            asyncio.get_running_loop().call_later(duration_s, receiver.stop)
        await receiver.serve(sock, ready)
    return stopped_by_hand


def _print_batch(batch: SpanBatch) -> None:
    for span in batch.server_spans:
        say(server_span_line(span))
    for record in batch.records:
        say(record_line(record))


def record_line(r: ServedRequest) -> str:
    """"12:00:01.234 cmpl-…-0  queue 0.1 ms  prefill 40.0 ms  decode 161.0 ms  TTFT 94.0 ms  E2E 251.0 ms  9→16 tokens
    vllm@gpu-7": one served request as its server timed it."""
    kv = f"  (KV transfer {_ms(r.kv_transfer_s)})" if r.kv_transfer_s is not None else ""
    return (f"{_clock(r.start_unix)} {r.request_id or '(no id)'}  queue {_ms(r.queue_s)}  prefill {_ms(r.prefill_s)}{kv}"
            f"  decode {_ms(r.decode_s)}  TTFT {_ms(r.ttft_s)}  E2E {_ms(r.e2e_s)}"
            f"  {r.prompt_tokens:,}→{r.completion_tokens:,} tokens  {_sender(r.service, r.host)}")


def server_span_line(span: ServerSpan) -> str:
    return f"{_clock(span.start_unix)} start-up: {span.name} {span.duration_s:.2f} s  {_sender(span.service, span.host)}"


def summary_text(records: list[ServedRequest], server_spans: list[ServerSpan], receiver: TraceReceiver,
                 listened_s: float) -> str:
    """The end of a run: how many requests from whom, each phase's percentiles, and what was not taken in."""
    summary = served_summary(records)
    senders = ", ".join(summary["senders"]) or "no sender"
    mine = f" ({summary['sent_by_phasetop']} sent by phasetop)" if summary["sent_by_phasetop"] else ""
    noun = "request" if len(records) == 1 else "requests"
    lines = [f"{len(records):,} {noun} served over {listened_s:.1f} s of listening from {senders}{mine}"]
    for name in PHASES:
        figures = summary[name]
        if figures["n"]:
            cells = "  ".join(f"{q} {_ms(figures[q])}" for q in ("p50", "p90", "p99"))
            lines.append(f"  {PHASE_LABELS[name]:<8} {cells}  (n={figures['n']})")
    if records:
        lines.append("  (outside = E2E − queue − prefill − decode: on vLLM its API server's own time)")
    if server_spans:
        lines.append("  start-up: " + ", ".join(f"{s.name} {s.duration_s:.2f} s" for s in server_spans))
    lost = not_counted(receiver.window.tally, receiver.last_refusal)
    if lost:
        lines.append("  not counted: " + "; ".join(lost))
    refused = refused_line(receiver.window.tally)
    if refused:
        lines.append(f"  {refused}")
    return "\n".join(lines)


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1e3:,.1f} ms" if seconds < 10 else f"{seconds:,.2f} s"


def _clock(t_unix: float) -> str:
    try:
        return datetime.fromtimestamp(t_unix).strftime("%H:%M:%S.%f")[:-3]
    except (OverflowError, OSError, ValueError):  # a sender's clock is its own: any uint64 of nanoseconds
        return "??:??:??.???"


def _sender(service: str | None, host: str | None) -> str:
    return f"{service or '?'}@{host or '?'}"
