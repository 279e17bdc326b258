"""`phasetop sweep`: run one of the domain text's experiments, one row per value and a one-line finding."""

from __future__ import annotations

import argparse
from dataclasses import replace

from tui.cli.commands import COMMANDS
from tui.cli.common import EXIT_INTERRUPTED, base_url, check_url, meters, settings_from, stop_on_first_interrupt
from tui.cli.options import add_json_option, add_meter_option, add_server_options
from tui.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError, emit_json, note, say
from tui.cli.runs_common import add_runs_options, save_run_from_cli
from tui.config import Settings
from tui.core.experiments.columns import COLUMNS, table
from tui.core.experiments.disaggregation import DEFAULT_KV_LINK, KV_LINKS, find_link
from tui.core.experiments.plans import DEFAULT_VALUES, EXPERIMENTS, OWN_SIMULATORS, Plan, make_plan
from tui.core.hardware.roofline_target import RooflineTarget
from tui.core.hardware.roofline_traces import TRACED, RowPoint, experiment_trace
from tui.sources import loop
from tui.sources.servers.simulator_server import simulator_args
from tui.sources.detect import describe_configured
from tui.sources.errors import SourceError
from tui.sources.workloads.experiments import ExperimentResult, Progress
from tui.sources.http import client_for
from tui.sources.roofline_target import find_roofline_target
from tui.sources.guard import guard_for
from tui.workflows.measure import Measured, OnOwnSimulators, OnServer, measure

VALUES_HELP = "; ".join(f"{name}: {','.join(str(v) for v in values)}" for name, values in DEFAULT_VALUES.items())


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help=COMMANDS["sweep"],
        description="Run one experiment against the server and state its finding in one line. "
        "prompt-tokens: TTFT and decode rate against prompt length. prefix: a long shared prefix sent twice "
        "against a unique prompt. concurrency: aggregate tok/s and ITL against N streams at once. "
        "interference: a long prompt lands among 8 running streams (values: its length). "
        "context: ITL against token position in one long generation (values: positions). "
        "disaggregation: the interference workload on phasetop's own simulator, started in four setups on the same "
        "hardware (one device with chunked prefill off, one device with chunks of 512, 1P1D over --kv-link, 1P1D split "
        "on one device): it takes no --url (values: the long prompt's length). "
        "speculation: the same streams on phasetop's own simulator with n-gram speculative decoding off and on "
        "(3 drafts a step, each accepted 7 times in 10), a stream's decode rate at each batch with its interval: the gain "
        "at batch 1 and where it turns into a loss; it takes no --url (values: batches). "
        "Where the server states its max_model_len, every request fits it with 1/32 of it (at least 32 tokens) kept "
        "free, since a fitted prompt may come out a few tokens long; what was scaled to fit is one line on stderr "
        "and the JSON's `scaled` list.",
    )
    add_server_options(parser)
    parser.add_argument("--vary", metavar="WHAT", help=f"the experiment: {' | '.join(EXPERIMENTS)}")
    parser.add_argument("--values", metavar="N,N,…",
                        help=f"comma-separated values (defaults: {VALUES_HELP}). Where the server states its max_model_len, "
                        "defaults that cannot fit it are scaled down and say so; values given here that cannot fit are "
                        "a usage error before anything is sent, since a sweep of other values than those named is not the "
                        "one asked for")
    parser.add_argument("--max-tokens", type=int, metavar="K",
                        help="tokens each request generates (not for context); one that cannot fit max_model_len is a usage error")
    parser.add_argument("--repeat", type=int, metavar="R", help="times each value is measured; medians are reported")
    parser.add_argument("--kv-link", metavar="NAME|GB/s",
                        help=f"disaggregation only: the link 1P1D moves the KV over, {', '.join(KV_LINKS)} or a rate in GB/s "
                        f"(default {DEFAULT_KV_LINK})")
    parser.add_argument("--slo-ttft-ms", type=float, metavar="X",
                        help="disaggregation only, with --slo-itl-ms: a setup that serves prefill apart is worth it when it "
                        "keeps the long prompt's TTFT within X ms and the streams' worst gap within --slo-itl-ms where no "
                        "colocated setup does (without SLOs: when it is better on one and no worse on the other)")
    parser.add_argument("--slo-itl-ms", type=float, metavar="Y", help="disaggregation only: the streams' worst gap SLO")
    add_meter_option(parser)
    add_json_option(parser)
    add_runs_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    values = _values(args.values)
    _plan(args, values, None)  # bad flags fail before any request
    if args.vary in OWN_SIMULATORS:
        return _run_own(args, settings, values)
    if args.kv_link is not None or args.slo_ttft_ms is not None or args.slo_itl_ms is not None:
        raise CliError("--kv-link, --slo-ttft-ms and --slo-itl-ms apply to --vary disaggregation only", EXIT_USAGE)
    check_url(settings.url)
    measured, interrupted, target = loop.run(_sweep(settings, args, values))
    return _report(args, settings, measured, interrupted, f"{measured.server['kind']}{_version(measured.server)} at "
                   f"{measured.server['url']}, model {measured.server['model']}", target)


def _report(args: argparse.Namespace, settings: Settings, measured: Measured, interrupted: bool, heading: str,
            target: RooflineTarget | str | None = None) -> int:
    """The rows as JSON or a table (with their roofline where the experiment has a trace: `target`, or why none), the
    run saved when a row finished, then why it stopped short (Ctrl-C keeps what was measured)."""
    result = measured.result
    document = _with_roofline({"server": measured.server, **result.to_json()}, target)
    if args.json:
        emit_json(document)
    else:
        say(_table(heading, result))
        if "roofline" in document:
            roofline = document["roofline"]
            say(f"roofline: {roofline['reading'] or 'none, ' + roofline['reason']}")
    if measured.run is not None:  # a sweep cut short keeps the rows it finished, as the UI's does
        save_run_from_cli(args, settings, measured.run)
    if measured.error:
        raise CliError(measured.error, EXIT_INTERRUPTED if interrupted else EXIT_FAILED)
    return EXIT_OK


def _version(server: dict) -> str:
    return f" {server['version']}" if server.get("version") else ""


def _plan(args: argparse.Namespace, values: list[int] | None, max_model_len: int | None) -> Plan:
    if args.vary is None:
        raise CliError(f"give --vary {'|'.join(EXPERIMENTS)}", EXIT_USAGE)
    try:
        return make_plan(args.vary, values, args.max_tokens, args.repeat, max_model_len)
    except ValueError as error:
        raise CliError(str(error), EXIT_USAGE) from None


def _values(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        values = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CliError(f"bad --values {text!r}: give whole numbers separated by commas, e.g. 200,2000", EXIT_USAGE) from None
    if not values:
        raise CliError("--values is empty", EXIT_USAGE)
    return values


async def _sweep(settings: Settings, args: argparse.Namespace,
                 values: list[int] | None) -> tuple[Measured, bool, RooflineTarget | str | None]:
    """Detect the server, check the plan against its context length, run the experiment; whether a stop short was a
    Ctrl-C, and the roofline's target where the experiment has a trace."""
    async with client_for(settings, base_url(settings.url)) as client:
        try:
            server = await describe_configured(client, settings.api, settings.model)
            guard = await guard_for(client, server, settings.bandwidth_gbs)
            target = await find_roofline_target(client, server) if args.vary in TRACED else None
        except SourceError as error:
            raise CliError(str(error)) from None
        plan = _plan(args, values, server.max_model_len)
        if plan.scaled:
            note(f"sweep {plan.vary}: scaled {'; '.join(plan.scaled)}")
        stopping = False

        def stop() -> None:
            nonlocal stopping
            stopping = True
            note("sweep: stopping after the row under way (Ctrl-C again to abandon it)")

        with stop_on_first_interrupt(stop), meters(settings, "sweep", plan.streams) as meter_for:
            measured = await measure(plan, OnServer(client, server, guard), _print_progress,
                                     lambda: stopping, exact_length=settings.exact_length, meter_for=meter_for)
    if measured.result is None:  # nothing measured: the server went away before the first row
        raise CliError(measured.error)
    return measured, stopping, target


def _print_progress(progress: Progress) -> None:
    note(f"sweep {progress.vary} [{progress.fraction:4.0%}] {progress.message}")


def _run_own(args: argparse.Namespace, settings: Settings, values: list[int] | None) -> int:
    """An experiment that starts phasetop's simulator in each of its setups (disaggregation, speculation): no server
    to name."""
    if args.url is not None:
        raise CliError(f"sweep --vary {args.vary} starts phasetop's own simulator in each of its setups: it takes no --url",
                       EXIT_USAGE)
    if args.vary != "disaggregation" and (args.kv_link is not None or args.slo_ttft_ms is not None
                                          or args.slo_itl_ms is not None):
        raise CliError("--kv-link, --slo-ttft-ms and --slo-itl-ms apply to --vary disaggregation only", EXIT_USAGE)
    try:
        link = find_link(args.kv_link or DEFAULT_KV_LINK)
    except ValueError as error:
        raise CliError(str(error), EXIT_USAGE) from None
    if (args.slo_ttft_ms is None) != (args.slo_itl_ms is None):
        raise CliError("give --slo-ttft-ms and --slo-itl-ms together: a setup is judged on both phases", EXIT_USAGE)
    if any(v is not None and not v > 0 for v in (args.slo_ttft_ms, args.slo_itl_ms)):
        raise CliError("--slo-ttft-ms and --slo-itl-ms must be above 0", EXIT_USAGE)
    plan = replace(_plan(args, values, None), slos=tuple(None if ms is None else ms / 1e3
                                                         for ms in (args.slo_ttft_ms, args.slo_itl_ms)))
    stopping = False

    def stop() -> None:
        nonlocal stopping
        stopping = True
        note("sweep: stopping after the setup under way (Ctrl-C again to abandon it)")

    async def sweep() -> Measured:
        target = OnOwnSimulators(link, settings.sim.gpu, settings.sim.model, simulator_args(settings))
        with stop_on_first_interrupt(stop), meters(settings, "sweep", plan.streams) as meter_for:
            return await measure(plan, target, _print_progress, lambda: stopping, exact_length=settings.exact_length,
                                 meter_for=meter_for)

    measured = loop.run(sweep())
    if measured.result is None:
        raise CliError(measured.error)
    over = f", KV over {link.name} ({link.gbs:g} GB/s)" if args.vary == "disaggregation" else ""
    return _report(args, settings, measured, stopping, f"phasetop's simulator, {settings.sim.gpu}, model "
                   f"{settings.sim.model}{over}")


def _with_roofline(document: dict, target: RooflineTarget | str | None) -> dict:
    """Each row with its point on the roofline, in `phasetop roofline --json`'s fields (null, with the reason, where
    it has none), and the device's roofs and the trace's reading; the document as it is for an experiment with no
    trace (`target` None)."""
    if target is None:
        return document
    if isinstance(target, str):
        rows = [row | {"roofline": RowPoint(0, None, target).to_json()} for row in document["rows"]]
        roofline = {"target": None, "peak_flops": None, "peak_bytes_per_s": None, "ridge_flop_per_byte": None,
                    "reading": None, "reason": target}
    else:
        trace = experiment_trace(target, document["vary"], document["rows"])
        rows = [row | {"roofline": placed.to_json()} for row, placed in zip(document["rows"], trace.rows, strict=True)]
        roofline = {"target": target.to_json(), **target.roofs.to_json(), "reading": trace.reading, "reason": None}
    return document | {"rows": rows, "roofline": roofline}


def _table(heading: str, result: ExperimentResult) -> str:
    """The heading, the rows (a value's interval as its two ends), why a marked value has none, and the finding."""
    headers = [f"{c.label} {c.unit}".strip() if c.unit else c.label for c in COLUMNS[result.plan.vary]]
    shown = table(result.plan.vary, result.rows)
    widths = [max([len(h), *(len(r[i]) for r in shown.cells)]) for i, h in enumerate(headers)]
    lines = [heading, ""]
    lines.append("  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)))
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in shown.cells]
    lines += [f"no interval: {note}" for note in shown.notes]
    lines += ["", result.finding]
    return "\n".join(lines)
