"""`phasetop tune`: start the server once per setting, run the same load on each, and say which setting is best.

The loop `vllm bench sweep serve` runs in batch, for any server command: for each point of the grid the
`--vary` flags make, the command is started with those flags (in its own process group, waited on until
/health answers), the workload runs, the figures are kept and saved as a run, and the server is stopped.
A start that fails is a row with the server's own last line, and the loop goes on."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from time import monotonic

from tui.cli.common import add_json_option, add_meter_option, meters, settings_from
from tui.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError, emit_json, note, say
from tui.cli.runs_common import add_runs_options, save_run_from_cli
from tui.config import Settings
from tui.core.bench import bench_figures
from tui.core.delivery import flag_bursts
from tui.core.experiments import EXPERIMENTS, OWN_SIMULATORS, make_plan
from tui.core.runs import new_run
from tui.core.serve_command import CommandError, ServeCommand, Setting, grid, parse_vary
from tui.core.tune import OBJECTIVES, Objective, best
from tui.core.untrusted import one_line, redact_all
from tui.sources import loop
from tui.sources.detect import describe_configured
from tui.sources.errors import SourceError
from tui.sources.experiments import Progress, run_experiment
from tui.sources.http import client_for
from tui.sources.identity import server_identity
from tui.sources.load import LoadDial, LoadRunner, Workload
from tui.sources.managed_server import ServerStartError
from tui.sources.served_command import start_served


@dataclass(frozen=True, slots=True)
class TuneWorkload:
    """What runs on each setting: the bench load, or an experiment (`vary`) with its values (None: its defaults)."""

    kind: str
    vary: str | None = None
    values: tuple[int, ...] | None = None

    @classmethod
    def parse(cls, text: str) -> TuneWorkload:
        """`bench`, `sweep:interference`, `sweep:prompt-tokens:200,2000` (argparse shows the ValueError's line)."""
        kind, _, rest = text.strip().partition(":")
        if kind == "bench" and not rest:
            return cls("bench")
        vary, _, values = rest.partition(":")
        if kind != "sweep" or vary not in EXPERIMENTS or vary in OWN_SIMULATORS:
            raise argparse.ArgumentTypeError(f"{text!r}: give bench, or sweep:WHAT[:N,N,…] with WHAT one of "
                                             f"{', '.join(e for e in EXPERIMENTS if e not in OWN_SIMULATORS)}")
        try:
            numbers = tuple(int(v.replace("_", "")) for v in values.split(",")) if values else None
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: the values are whole numbers separated by commas") from None
        try:
            make_plan(vary, numbers)  # bad values fail before any server starts; the fit to max_model_len is per start
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"{text!r}: {error}") from None
        return cls("sweep", vary, numbers)

    def __str__(self) -> str:
        if self.kind == "bench":
            return "bench"
        return f"sweep:{self.vary}" + (f":{','.join(map(str, self.values))}" if self.values else "")


@dataclass(frozen=True, slots=True)
class Measured:
    """One setting's workload, done: the figures the table ranks, and what its run record keeps."""

    figures: dict
    identity: dict
    requests: list
    kind: str
    """The run's kind: bench, or sweep for an experiment (its rows and finding in `document`)."""
    params: dict
    """The workload's shape, for the run's params."""
    document: dict | None = None


DEFAULT_START_TIMEOUT_S = 600.0
"""vLLM on a GPU can take minutes to load a large model and capture its graphs."""
SOURCE = "phasetop tune"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "tune",
        help="start the server once per flag setting, run the same load on each, and pick the best",
        description="For every combination of the --vary values, start the --serve command with those flags, wait "
        "until /health answers, run the workload (like `phasetop bench`), save the run, and stop the server. "
        "A table of the figures per setting follows, the best by --optimize marked. Example: phasetop tune "
        "--serve 'vllm serve meta-llama/Llama-3.1-8B-Instruct' --vary max-num-batched-tokens=256,512,2048",
    )
    parser.add_argument("--serve", required=True, metavar="CMD",
                        help="the server command, quoted as for a shell; its --port (or the server's default) is where it is measured")
    parser.add_argument("--vary", action="append", required=True, metavar="FLAG=V1,V2,…",
                        help="a flag and its values (on/off for a boolean flag: --flag / --no-flag); repeat for a grid")
    parser.add_argument("--optimize", choices=tuple(OBJECTIVES), default="itl-p99",
                        help="what makes a setting best (default itl-p99); worst-gap is the longest any stream waited for a "
                        "token (a long prompt's stall: under any p99 when streams are long); goodput needs "
                        "--slo-ttft-ms or --slo-tpot-ms")
    parser.add_argument("--workload", type=TuneWorkload.parse, default=TuneWorkload("bench"), metavar="bench|sweep:WHAT[:N,N,…]",
                        help="what runs on each setting: bench (the load below; default), or one of `phasetop sweep`'s "
                        f"experiments ({' | '.join(e for e in EXPERIMENTS if e not in OWN_SIMULATORS)}) with its values, e.g. sweep:interference:4000 or "
                        "sweep:prompt-tokens:200,2000; the figures are over all the experiment's requests, its finding "
                        "is under its row")
    parser.add_argument("--num-prompts", type=int, default=32, metavar="N", help="requests per setting (default 32)")
    parser.add_argument("--max-concurrency", type=int, default=8, metavar="C", help="most in flight at once (default 8)")
    parser.add_argument("--request-rate", type=float, default=math.inf, metavar="R|inf", help="requests a second (default inf)")
    parser.add_argument("--prompt-tokens", type=int, default=1024, metavar="N", help="prompt length (default 1024)")
    parser.add_argument("--max-tokens", type=int, default=128, metavar="K", help="tokens each request generates (default 128)")
    parser.add_argument("--slo-ttft-ms", type=float, metavar="X", help="goodput counts requests with TTFT at most X ms")
    parser.add_argument("--slo-tpot-ms", type=float, metavar="Y", help="goodput counts requests with TPOT at most Y ms")
    parser.add_argument("--start-timeout", type=float, default=DEFAULT_START_TIMEOUT_S, metavar="S",
                        help=f"longest wait for each start's /health (default {DEFAULT_START_TIMEOUT_S:.0f} s)")
    parser.add_argument("--renice", action="store_true",
                        help="vLLM's engine and worker threads at nice 19 once each start is up (on a small CPU host "
                        "they busy-poll and starve the client that measures them)")
    add_meter_option(parser)
    add_json_option(parser)
    add_runs_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    command, url, points, objective = _plan(args)
    settings = settings_from(args)
    note(f"tune: {len(points)} settings of `{command}` at {url}, {_what_runs(args)} each, best by {objective.label}")
    rows = []
    for n, point in enumerate(points, start=1):
        rows.append(_measure(args, settings, command, point, f"{n}/{len(points)}"))
    chosen = best([row["figures"] for row in rows], objective)
    document = redact_all({"serve": str(command), "optimize": objective.name, "best": chosen, "rows": rows})
    if args.json:
        emit_json(document)
    else:
        say(table(rows, objective, chosen))
    if chosen is None:
        raise CliError("no setting was measured: every start failed (the rows say why)", EXIT_FAILED)
    return EXIT_OK


def _plan(args: argparse.Namespace) -> tuple[ServeCommand, str, list[tuple[Setting, ...]], Objective]:
    try:
        command = ServeCommand.parse(args.serve)
        url = command.url  # a --port that is not a port is a usage error now, not at the first start
        varied = [parse_vary(text) for text in args.vary]
    except CommandError as error:
        raise CliError(str(error), EXIT_USAGE) from None
    flags = [flag for flag, _ in varied]
    if len(set(flags)) != len(flags):
        raise CliError("each flag is varied once: put its values in one --vary", EXIT_USAGE)
    if args.num_prompts < 1 or args.max_concurrency < 1 or args.prompt_tokens < 1 or args.max_tokens < 1:
        raise CliError("--num-prompts, --max-concurrency, --prompt-tokens and --max-tokens must be at least 1", EXIT_USAGE)
    if not args.request_rate > 0 or not args.start_timeout > 0:
        raise CliError("--request-rate and --start-timeout must be above 0", EXIT_USAGE)
    objective = OBJECTIVES[args.optimize]
    if objective.name == "goodput" and args.slo_ttft_ms is None and args.slo_tpot_ms is None:
        raise CliError("--optimize goodput needs --slo-ttft-ms or --slo-tpot-ms (what a good request is)", EXIT_USAGE)
    return command, url, grid(varied), objective


def _measure(args: argparse.Namespace, settings: Settings, base: ServeCommand, point: tuple[Setting, ...],
             step: str) -> dict:
    """One row: start the command with `point`'s flags, run the workload, stop it."""
    command = base
    for setting in point:
        command = command.with_setting(setting)
    named = " ".join(str(s) for s in point)
    row = {"settings": {s.flag: s.value for s in point}, "command": str(command), "figures": None, "error": None,
           "run_id": None}
    note(f"tune {step} {named}: starting…")
    started = datetime.now(UTC)
    try:
        server = start_served(command, args.start_timeout, renice=args.renice,
                              on_wait=lambda s, line: note(f"tune {step}: waiting for /health, {s:.0f} s: {one_line(line, 160)}"))
    except ServerStartError as error:
        row["error"] = str(error)
        note(f"tune {step} {named}: {error}")
        return row
    try:
        measured = loop.run(_bench(args, settings, command.url) if args.workload.kind == "bench"
                            else _experiment(args, settings, command.url, step))
    except SourceError as error:  # an experiment's failure too (ExperimentFailed)
        row["error"] = f"the {'load' if args.workload.kind == 'bench' else 'experiment'} failed: {error}"
        note(f"tune {step} {named}: {row['error']}")
        return row
    finally:
        server.stop()
    row["figures"] = measured.figures
    params = {"source": SOURCE, "settings": row["settings"], "workload": str(args.workload), **measured.params}
    record = new_run(measured.kind, params, measured.identity, [r.to_json() for r in measured.requests],
                     measured.document or measured.figures, started, datetime.now(UTC))
    if save_run_from_cli(args, settings, record):
        row["run_id"] = record["id"]
    note(f"tune {step} {named}: {measured.figures['completed']} done, {describe(measured.figures)}")
    return row


def _what_runs(args: argparse.Namespace) -> str:
    if args.workload.kind == "bench":
        return f"{args.num_prompts} requests"
    return f"the {args.workload.vary} experiment"


async def _bench(args: argparse.Namespace, settings: Settings, url: str) -> Measured:
    in_flight = min(args.max_concurrency, args.num_prompts)
    async with client_for(settings, url, in_flight) as client:
        server = await describe_configured(client, settings.api, settings.model)
        identity = await server_identity(client, server)
        workload = Workload(args.prompt_tokens, args.max_tokens, args.num_prompts, exact_length=settings.exact_length)
        with meters(settings, "tune", in_flight) as meter_for:
            result = await LoadRunner(client, server, workload, LoadDial(args.request_rate, in_flight), meter_for(client)).run()
    requests = flag_bursts(result.requests)
    params = {"num_prompts": args.num_prompts, "max_concurrency": args.max_concurrency,
              "request_rate": "inf" if math.isinf(args.request_rate) else args.request_rate,
              "prompt_tokens": args.prompt_tokens, "max_tokens": args.max_tokens}
    return Measured(bench_figures(requests, result.duration_s, *_slo(args)), identity, requests, "bench", params)


async def _experiment(args: argparse.Namespace, settings: Settings, url: str, step: str) -> Measured:
    """The experiment on this start: fitted to its max_model_len, figures over all its requests, its finding kept."""
    workload = args.workload
    async with client_for(settings, url) as client:
        server = await describe_configured(client, settings.api, settings.model)
        try:
            plan = make_plan(workload.vary, workload.values, max_model_len=server.max_model_len)
        except ValueError as error:
            raise SourceError(str(error)) from None
        started = monotonic()

        def progress(p: Progress) -> None:
            note(f"tune {step} {p.vary} [{p.fraction:4.0%}] {p.message}")

        with meters(settings, "tune", plan.streams) as meter_for:
            result = await run_experiment(client, server, plan, progress, exact_length=settings.exact_length,
                                          meter=meter_for(client))
        duration_s = monotonic() - started
        identity = await server_identity(client, server)
    figures = bench_figures(result.requests, duration_s, *_slo(args)) | {"finding": result.finding}
    return Measured(figures, identity, list(result.requests), "sweep", plan.to_json(),
                    {"server": server.to_json(), **result.to_json()})


def _slo(args: argparse.Namespace) -> tuple[float | None, float | None]:
    return tuple(None if ms is None else ms / 1e3 for ms in (args.slo_ttft_ms, args.slo_tpot_ms))


COLUMNS = (("TTFT p50", "ttft_s", "p50"), ("TTFT p99", "ttft_s", "p99"), ("ITL p50", "itl_s", "p50"),
           ("ITL p99", "itl_s", "p99"), ("worst gap", "itl_s", "max"))


def describe(figures: dict) -> str:
    parts = [f"{label} {figures[key][q] * 1e3:,.1f} ms" for label, key, q in COLUMNS if figures[key].get(q) is not None]
    return ", ".join(parts + [f"{figures['output_throughput']:,.0f} output tok/s"])


def table(rows: list[dict], objective: Objective, chosen: int | None) -> str:
    """One line per setting; a failed start says why in place of its figures; the best marked."""
    names = [" ".join(f"{k}={v}" for k, v in row["settings"].items()) for row in rows]
    width = max(len("setting"), *map(len, names))
    header = f"{'setting':<{width}}  " + "  ".join(f"{label:>9}" for label, _, _ in COLUMNS) + "  output tok/s"
    lines = [header]
    for i, (name, row) in enumerate(zip(names, rows, strict=True)):
        figures = row["figures"]
        if figures is None:
            lines.append(f"{name:<{width}}  not measured: {one_line(row['error'] or '', 200)}")
            continue
        cells = [_ms(figures[key].get(q)) for _, key, q in COLUMNS]
        mark = f"  ◀ best {objective.label}" if i == chosen else ""
        lines.append(f"{name:<{width}}  " + "  ".join(f"{c:>9}" for c in cells) + f"  {figures['output_throughput']:>12,.0f}{mark}")
        if figures.get("finding"):
            lines.append(f"{'':<{width}}  ↳ {one_line(figures['finding'], 300)}")
    return "\n".join(lines)


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1e3:,.1f} ms"
