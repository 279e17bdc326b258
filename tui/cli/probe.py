"""`phasetop probe`: time R streamed requests, one after another, and split each into its two phases."""

from __future__ import annotations

import argparse

from tui.cli.commands import COMMANDS
from tui.cli.common import base_url, check_url, meters, note_short_answers, settings_from
from tui.cli.options import add_json_option, add_meter_option, add_server_options
from tui.cli.output import EXIT_OK, EXIT_USAGE, CliError, emit_json, note, say
from tui.cli.runs_common import add_runs_options, save_run_from_cli
from tui.config import Settings
from tui.core.measure.delivery import DELIVERY_NOT_GENERATION, burst_line
from tui.core.measure.reconcile import reconcile
from tui.core.measure.records import RequestTiming, chunking_line, summarize_requests
from tui.core.measure.stats import summarize
from tui.sources import loop
from tui.sources.detect import ServerInfo, describe_configured
from tui.sources.errors import SourceError
from tui.sources.guard import guard_for
from tui.sources.http import client_for
from tui.sources.stream import StreamRequest
from tui.sources.workloads.probe import ProbeParams
from tui.workflows.measure import ProbeMeasured, measure_probe

DEFAULT_PROMPT_TOKENS = 200
DEFAULT_MAX_TOKENS = 64


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "probe",
        help=COMMANDS["probe"],
        description="Send R streamed requests one after another and report each one's TTFT, prefill rate, "
        "decode rate and inter-token latency, with the server's own phase split where it reports one.",
    )
    add_server_options(parser)
    prompt = parser.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", metavar="TEXT", help="the prompt, as given")
    prompt.add_argument(
        "--prompt-tokens", type=int, metavar="N",
        help=f"a generated prompt of N tokens, exact where the server has /tokenize (default {DEFAULT_PROMPT_TOKENS})",
    )
    parser.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS, metavar="K", help=f"tokens to generate (default {DEFAULT_MAX_TOKENS})")
    parser.add_argument("--repeat", type=int, default=1, metavar="R", help="requests to send, one after another (default 1)")
    parser.add_argument("--chat", action="store_true", help="use the chat endpoint instead of plain completion")
    add_meter_option(parser)
    add_json_option(parser)
    add_runs_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    _check(args, settings)
    probed = loop.run(_probe(settings, args))
    requests = probed.requests
    if args.json:
        emit_json({
            "server": probed.server.to_json(),
            "requests": [{**r.to_json(), "reconcile": _reconciled_json(r)} for r in requests],
            "summary": summarize_requests(requests),
        })
    else:
        say(_table(probed.server, requests))
    if probed.run is not None:
        save_run_from_cli(args, settings, probed.run)
    if probed.failure:
        raise CliError(probed.failure)
    note_short_answers("probe", probed.server.kind, requests, args.max_tokens)
    return EXIT_OK


def _check(args: argparse.Namespace, settings: Settings) -> None:
    check_url(settings.url)
    if args.prompt_tokens is not None and args.prompt_tokens < 1:
        raise CliError("--prompt-tokens must be at least 1", EXIT_USAGE)
    if args.prompt is not None and not args.prompt.strip():
        raise CliError("--prompt is empty", EXIT_USAGE)
    if args.max_tokens < 1 or args.repeat < 1:
        raise CliError("--max-tokens and --repeat must be at least 1", EXIT_USAGE)


async def _probe(settings: Settings, args: argparse.Namespace) -> ProbeMeasured:
    """Detect and read the guard, then run the requests (stopping at the first failure, returned as one line)."""
    try:
        async with client_for(settings, base_url(settings.url)) as client:
            server = await describe_configured(client, settings.api, settings.model)
            guard = await guard_for(client, server, settings.bandwidth_gbs)
    except SourceError as error:
        raise CliError(str(error)) from None
    params = ProbeParams(args.prompt, args.prompt_tokens or DEFAULT_PROMPT_TOKENS, args.max_tokens, args.repeat,
                         args.chat)

    def note_inexact_length(index: int, request: StreamRequest) -> None:
        """Say when the server's tokenizer would not give the asked length (too short for the nonce, or no
        one-token pad), since every figure on a prompt-length axis depends on it."""
        if args.prompt is None and not request.prompt_tokens_estimated and request.prompt_tokens != params.prompt_tokens:
            note(f"phasetop probe: request {index + 1}: asked for {params.prompt_tokens} prompt tokens; the closest the "
                 f"server's tokenizer allowed is {request.prompt_tokens}")

    with meters(settings, "probe", 1) as meter_for:
        return await measure_probe(settings, server, guard, params, meter_for, note_inexact_length,
                                   keep_run=not args.no_save)


def _table(server: ServerInfo, requests: list[RequestTiming]) -> str:
    version = f" {server.version}" if server.version else ""
    lines = [f"{server.kind}{version} at {server.url}, model {server.model}", ""]
    header = (f"{'#':>3}  {'TTFT ms':>9}  {'prefill tok/s':>19}  {'decode tok/s':>12}  {'ITL p50 ms':>10}  {'ITL p99 ms':>10}  "
              f"{'tokens in/out':>13}  {'cached':>6}")
    lines.append(header)
    for number, r in enumerate(requests, 1):
        if not r.ok:
            lines.append(f"{number:>3}  failed: {r.error}")
            continue
        itl = summarize(r.itl_s)
        prefill = f"{_num(r.prefill_tok_s, 0)} ({r.prefill_source})" if r.prefill_source else "-"
        mark = "~" if r.tokens_estimated else ""
        tokens = f"{mark}{r.prompt_tokens or '-'}/{r.output_tokens or '-'}"
        cold = "  cold (start-up paid)" if r.cold else ""
        burst = f"  {DELIVERY_NOT_GENERATION}" if r.burst else ""
        lines.append(
            f"{number:>3}  {_num(_ms(r.ttft_s), 1):>9}  {prefill:>19}  {_num(r.decode_tok_s, 1):>12}  "
            f"{_num(_ms(itl.p50), 2):>10}  {_num(_ms(itl.p99), 2):>10}  {tokens:>13}  {_cached(r):>6}{cold}{burst}"
        )
    done = [r for r in requests if r.ok and not r.burst]
    if len(done) > 1:
        summary = summarize_requests(requests)
        ttft, decode = summary["ttft_s"], summary["decode_tok_s"]
        lines += ["", f"over {len(done)} requests: TTFT p50 {_num(_ms(ttft['p50']), 1)} ms, p99 {_num(_ms(ttft['p99']), 1)} ms; "
                  f"decode p50 {_num(decode['p50'], 1)} tok/s"]
    if line := burst_line(requests):
        lines += ["", line]
    if line := chunking_line(requests):
        lines += ["", line]
    lines += _reconciled_lines(requests)
    if any(r.server_split and r.server_split.cached_from_metrics for r in requests):
        lines.append("* cached tokens: the growth of the server's cache-hit counter around the request (vLLM puts its own "
                     "count in usage with --enable-prompt-tokens-details)")
    if any(r.tokens_estimated for r in done):
        lines.append("~ token counts estimated by the client (the server gave no usage)")
    return "\n".join(lines)


def _cached(timing: RequestTiming) -> str:
    split = timing.server_split
    if split is None or split.cached_tokens is None:
        return "-"
    return f"{split.cached_tokens}{'*' if split.cached_from_metrics else ''}"


def _ms(seconds: float | None) -> float | None:
    return seconds * 1000 if seconds is not None else None


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _reconciled_json(timing: RequestTiming) -> dict | None:
    both = reconcile(timing)
    return {**both.to_json(), "ttft_parts": both.ttft_parts(timing.connect_s)} if both else None


def _reconciled_lines(requests: list[RequestTiming]) -> list[str]:
    """Client beside server for each request whose server reported its own split (llama.cpp, Ollama, vLLM);
    where it gave its queue time too (vLLM), TTFT in its parts."""
    rows = [(n, r, both) for n, r in enumerate(requests, 1) if r.ok and (both := reconcile(r)) and both.server_prompt_s is not None]
    if not rows:
        return []
    gap_is = rows[0][2].gap_is
    lines = ["", f"client vs server: gap = client TTFT - server prompt time = {gap_is}",
             f"{'#':>3}  {'TTFT ms':>9}  {'server prompt ms':>16}  {'gap ms':>8}  {'decode tok/s':>12}  {'server tok/s':>12}  {'cached':>6}"]
    for number, _, b in rows:
        lines.append(
            f"{number:>3}  {_num(_ms(b.client_ttft_s), 1):>9}  {_num(_ms(b.server_prompt_s), 1):>16}  {_num(_ms(b.ttft_gap_s), 1):>8}  "
            f"{_num(b.client_decode_tok_s, 1):>12}  {_num(b.server_decode_tok_s, 1):>12}  {b.server_cached_tokens if b.server_cached_tokens is not None else '-':>6}"
        )
    parts = [(n, r.connect_s, b) for n, r, b in rows if b.network_s is not None]
    if parts:
        lines += ["", "TTFT in parts (ms): connect (before the clock) | network | queue | prefill and first step",
                  f"{'#':>3}  {'connect':>8}  {'network':>8}  {'queue':>8}  {'prefill+1st':>11}"]
        for number, connect_s, b in parts:
            lines.append(f"{number:>3}  {_num(_ms(connect_s), 2):>8}  {_num(_ms(b.network_s), 1):>8}  "
                         f"{_num(_ms(b.server_queue_s), 1):>8}  {_num(_ms(b.server_prompt_s), 1):>11}")
    return lines
