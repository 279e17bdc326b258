"""`phasetop tune`: start the server once per setting, run the same load on each, and say which setting is best.

The loop `vllm bench sweep serve` runs in batch, for any server command: for each point of the grid the
`--vary` flags make, the command is started with those flags (in its own process group, waited on until
/health answers), the workload runs, the figures are kept and saved as a run, and the server is stopped.
A start that fails is a row with the server's own last line, and the loop goes on."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from time import monotonic

from tui.cli.commands import COMMANDS
from tui.cli.common import meters, settings_from
from tui.cli.options import add_json_option, add_meter_option
from tui.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError, emit_json, note, say
from tui.cli.runs_common import add_runs_options, save_run_from_cli
from tui.config import Settings
from tui.core.measure.bench import bench_figures
from tui.core.experiments.plans import EXPERIMENTS, OWN_SIMULATORS, make_plan
from tui.core.serving.serve_command import CommandError, ServeCommand, Setting, grid, parse_vary
from tui.core.serving.tune import OBJECTIVES, Objective, Standing, standing
from tui.core.measure.uncertainty import LEVEL, PRACTICAL
from tui.core.untrusted import one_line, redact_all
from tui.sources import loop
from tui.sources.detect import describe_configured
from tui.sources.errors import SourceError
from tui.sources.workloads.experiments import Progress
from tui.sources.http import client_for
from tui.sources.workloads.load import LoadDial, LoadRunner, Workload
from tui.sources.servers.managed_server import ServerStartError
from tui.sources.guard import guard_for
from tui.sources.workloads.measure import OnServer, measure, measure_load
from tui.sources.servers.served_command import start_served


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
    """One setting's workload, done: the figures the table ranks, the requests behind them, and its run record."""

    figures: dict
    requests: list
    run: dict | None


DEFAULT_START_TIMEOUT_S = 600.0
"""vLLM on a GPU can take minutes to load a large model and capture its graphs."""
SOURCE = "phasetop tune"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "tune",
        help=COMMANDS["tune"],
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
    parser.add_argument("--budget", type=Budget.parse, default=None, metavar="N|Ss",
                        help="what repeats may cost while the leader is not surely better than the runner-up: requests "
                        "(e.g. 64) or seconds (e.g. 90s); each repeat runs the workload again on both (default: twice "
                        "--num-prompts; 0: no repeats)")
    parser.add_argument("--renice", action="store_true",
                        help="vLLM's engine and worker threads at nice 19 once each start is up (on a small CPU host "
                        "they busy-poll and starve the client that measures them)")
    add_meter_option(parser)
    add_json_option(parser)
    add_runs_options(parser)
    parser.set_defaults(handler=run)


@dataclass(frozen=True, slots=True)
class Budget:
    """What `--budget` allows the repeats: requests, or seconds (`90s`)."""

    requests: int | None = None
    seconds: float | None = None

    @classmethod
    def parse(cls, text: str) -> Budget:
        text = text.strip()
        try:
            if text.endswith("s"):
                seconds = float(text[:-1])
                if seconds >= 0 and math.isfinite(seconds):
                    return cls(seconds=seconds)
            elif int(text) >= 0:
                return cls(requests=int(text))
        except ValueError:
            pass
        raise argparse.ArgumentTypeError(f"{text!r}: give requests (e.g. 64) or seconds (e.g. 90s), 0 or more")

    def left(self, requests: int, started: float) -> bool:
        if self.seconds is not None:
            return monotonic() - started < self.seconds
        return requests < (self.requests or 0)

    def __str__(self) -> str:
        return f"{self.seconds:g} s" if self.seconds is not None else f"{self.requests} requests"


@dataclass(slots=True)
class Tried:
    """One setting's rounds so far: its row (what the JSON says), and the requests and values the verdict weighs."""

    point: tuple[Setting, ...]
    row: dict
    requests: list[dict]
    round_values: list[float]
    rounds: list[Measured]


def run(args: argparse.Namespace) -> int:
    command, url, points, objective = _plan(args)
    settings = settings_from(args)
    note(f"tune: {len(points)} settings of `{command}` at {url}, {_what_runs(args)} each, best by {objective.label}")
    tried = [_tried(args, settings, command, point, f"{n}/{len(points)}", objective) for n, point in enumerate(points, start=1)]
    budget = args.budget if args.budget is not None else Budget(requests=2 * args.num_prompts)
    where, repeats, stopped = _separate(args, settings, command, tried, objective, budget)
    rows = [t.row for t in tried]
    document = redact_all({"serve": str(command), "optimize": objective.name, "best": where.leader, "rows": rows,
                           "verdict": _verdict_json(where, repeats, stopped)})
    if args.json:
        emit_json(document)
    else:
        say("\n".join(filter(None, (table(rows, objective, where), verdict_line(rows, objective, where, repeats, stopped, budget)))))
    if where.leader is None:
        raise CliError("no setting was measured: every start failed (the rows say why)", EXIT_FAILED)
    return EXIT_OK


def _tried(args: argparse.Namespace, settings: Settings, command: ServeCommand, point: tuple[Setting, ...], step: str,
           objective: Objective) -> Tried:
    row, measured = _measure(args, settings, command, point, step)
    tried = Tried(point, row, [], [], [])
    if measured is not None:
        _add_round(tried, measured, args, objective)
    return tried


def _add_round(tried: Tried, measured: Measured, args: argparse.Namespace, objective: Objective) -> None:
    """A round's requests join the setting's; its figures are then over every round (throughputs over their time)."""
    tried.rounds.append(measured)
    tried.requests += [r.to_json() for r in measured.requests]
    value = objective.value(measured.figures)
    if value is not None:
        tried.round_values.append(value)
    every = [r for m in tried.rounds for r in m.requests]
    figures = bench_figures(every, sum(m.figures["duration_s"] for m in tried.rounds), *_slo(args))
    if tried.rounds[0].figures.get("finding"):
        figures["finding"] = tried.rounds[0].figures["finding"]
    tried.row["figures"], tried.row["rounds"] = figures, len(tried.rounds)


def _separate(args: argparse.Namespace, settings: Settings, command: ServeCommand, tried: list[Tried],
              objective: Objective, budget: Budget) -> tuple[Standing, int, str]:
    """Repeat the leader's and the runner-up's workloads, a round each, until the lead holds, they tie, or the budget
    is spent. Returns where they stand, the repeat rounds run, and why it stopped."""
    started, spent, repeats = monotonic(), 0, 0
    while True:
        where = standing([t.row["figures"] for t in tried], [t.requests for t in tried],
                         [t.round_values for t in tried], objective)
        if where.leader is None or where.runner_up is None:
            return where, repeats, "one setting measured" if where.leader is not None else "nothing measured"
        if where.settled:
            return where, repeats, "separated" if where.separated else "tie"
        if not budget.left(spent, started):
            return where, repeats, "budget spent"
        repeats += 1
        for i in (where.leader, where.runner_up):
            note(f"tune: repeat {repeats}, {_named(tried[i].point)}: the lead is not yet sure "
                 f"({where.judged.verdict.replace('_', ' ')})")
            repeated, measured = _measure(args, settings, command, tried[i].point, f"repeat {repeats}")
            if measured is None:
                tried[i].row["repeat_error"] = f"repeat {repeats}: {repeated['error']}"
                return where, repeats, "a repeat failed"
            spent += len(measured.requests)
            tried[i].row["repeat_run_ids"].append(repeated["run_id"])
            _add_round(tried[i], measured, args, objective)


def _verdict_json(where: Standing, repeats: int, stopped: str) -> dict:
    judged = where.judged.to_json() if where.judged is not None else {}
    return {"leader": where.leader, "runner_up": where.runner_up, "separated": where.separated,
            **{k: judged.get(k) for k in ("verdict", "ci_low", "ci_high", "level", "more_requests")},
            "repeats": repeats, "stopped": stopped}


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


def _named(point: tuple[Setting, ...]) -> str:
    return " ".join(str(s) for s in point)


def _measure(args: argparse.Namespace, settings: Settings, base: ServeCommand, point: tuple[Setting, ...],
             step: str) -> tuple[dict, Measured | None]:
    """One row and its measurement, saved as a run: start the command with `point`'s flags, run the workload, stop
    it (a failed start or workload: the row says why, and no measurement)."""
    command = base
    for setting in point:
        command = command.with_setting(setting)
    named = _named(point)
    row = {"settings": {s.flag: s.value for s in point}, "command": str(command), "figures": None, "error": None,
           "run_id": None, "repeat_run_ids": [], "repeat_error": None, "rounds": 0}
    note(f"tune {step} {named}: starting…")
    try:
        server = start_served(command, args.start_timeout, renice=args.renice,
                              on_wait=lambda s, line: note(f"tune {step}: waiting for /health, {s:.0f} s: {one_line(line, 160)}"))
    except ServerStartError as error:
        row["error"] = str(error)
        note(f"tune {step} {named}: {error}")
        return row, None
    params = {"source": SOURCE, "settings": row["settings"], "workload": str(args.workload)}
    try:
        measured = loop.run(_bench(args, settings, command.url, params) if args.workload.kind == "bench"
                            else _experiment(args, settings, command.url, step, params))
    except SourceError as error:  # an experiment's failure too (ExperimentFailed)
        row["error"] = f"the {'load' if args.workload.kind == 'bench' else 'experiment'} failed: {error}"
        note(f"tune {step} {named}: {row['error']}")
        return row, None
    finally:
        server.stop()
    if measured.run is not None and save_run_from_cli(args, settings, measured.run):
        row["run_id"] = measured.run["id"]
    note(f"tune {step} {named}: {measured.figures['completed']} done, {describe(measured.figures)}")
    return row, measured


def _what_runs(args: argparse.Namespace) -> str:
    if args.workload.kind == "bench":
        return f"{args.num_prompts} requests"
    return f"the {args.workload.vary} experiment"


async def _bench(args: argparse.Namespace, settings: Settings, url: str, params: dict) -> Measured:
    in_flight = min(args.max_concurrency, args.num_prompts)
    async with client_for(settings, url, in_flight) as client:
        server = await describe_configured(client, settings.api, settings.model)
        guard = await guard_for(client, server, settings.bandwidth_gbs)
        workload = Workload(args.prompt_tokens, args.max_tokens, args.num_prompts, exact_length=settings.exact_length)
        params = {**params, "num_prompts": args.num_prompts, "max_concurrency": args.max_concurrency,
                  "request_rate": "inf" if math.isinf(args.request_rate) else args.request_rate,
                  "prompt_tokens": args.prompt_tokens, "max_tokens": args.max_tokens}
        with meters(settings, "tune", in_flight) as meter_for:
            runner = LoadRunner(client, server, workload, LoadDial(args.request_rate, in_flight), meter_for(client))
            measured = await measure_load(runner, params, guard, _slo(args))
    return Measured(measured.figures, measured.requests, measured.run)


async def _experiment(args: argparse.Namespace, settings: Settings, url: str, step: str, params: dict) -> Measured:
    """The experiment on this start: fitted to its max_model_len, figures over all its requests, its finding kept."""
    workload = args.workload
    async with client_for(settings, url) as client:
        server = await describe_configured(client, settings.api, settings.model)
        guard = await guard_for(client, server, settings.bandwidth_gbs)
        try:
            plan = make_plan(workload.vary, workload.values, max_model_len=server.max_model_len)
        except ValueError as error:
            raise SourceError(str(error)) from None

        def progress(p: Progress) -> None:
            note(f"tune {step} {p.vary} [{p.fraction:4.0%}] {p.message}")

        with meters(settings, "tune", plan.streams) as meter_for:
            measured = await measure(plan, OnServer(client, server, guard), progress, exact_length=settings.exact_length,
                                     meter_for=meter_for, params=params)
    if measured.error:
        raise SourceError(measured.error)
    result = measured.result
    figures = bench_figures(result.requests, measured.duration_s, *_slo(args)) | {"finding": result.finding}
    return Measured(figures, list(result.requests), measured.run)


def _slo(args: argparse.Namespace) -> tuple[float | None, float | None]:
    return tuple(None if ms is None else ms / 1e3 for ms in (args.slo_ttft_ms, args.slo_tpot_ms))


COLUMNS = (("TTFT p50", "ttft_s", "p50"), ("TTFT p99", "ttft_s", "p99"), ("ITL p50", "itl_s", "p50"),
           ("ITL p99", "itl_s", "p99"), ("worst gap", "itl_s", "max"))


def describe(figures: dict) -> str:
    parts = [f"{label} {figures[key][q] * 1e3:,.1f} ms" for label, key, q in COLUMNS if figures[key].get(q) is not None]
    return ", ".join(parts + [f"{figures['output_throughput']:,.0f} output tok/s"])


def table(rows: list[dict], objective: Objective, where: Standing) -> str:
    """One line per setting; a failed start says why in place of its figures; the leader marked, as best only where
    the lead holds."""
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
        mark = f"  ◀ {'best' if where.separated else 'leads'} {objective.label}" if i == where.leader else ""
        lines.append(f"{name:<{width}}  " + "  ".join(f"{c:>9}" for c in cells) + f"  {figures['output_throughput']:>12,.0f}{mark}")
        if figures.get("finding"):
            lines.append(f"{'':<{width}}  ↳ {one_line(figures['finding'], 300)}")
        if row.get("repeat_error"):
            lines.append(f"{'':<{width}}  ↳ not repeated: {one_line(row['repeat_error'], 200)}")
    return "\n".join(lines)


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1e3:,.1f} ms"


def verdict_line(rows: list[dict], objective: Objective, where: Standing, repeats: int, stopped: str, budget: Budget) -> str:
    """How sure the lead is, in words, and why the repeats stopped."""
    if where.leader is None or where.runner_up is None:
        return ""
    names = [" ".join(f"{k}={v}" for k, v in rows[i]["settings"].items()) for i in (where.leader, where.runner_up)]
    judged = where.judged
    tried = f"after {repeats} repeat round{'s' if repeats != 1 else ''} of the two" if repeats else "after one round each"
    if where.separated:
        low, high = (f"{abs(v) * 1e3 if objective.quantile else abs(v):,.1f}" for v in (judged.ci_high, judged.ci_low)) \
            if judged.ci else ("", "")
        by = f" by {low} … {high}{' ms' if objective.quantile else ''} ({100 * LEVEL:g} % interval)" if judged.ci else ""
        return f"{names[0]} beats {names[1]} on {objective.label}{by}, {tried}"
    if stopped == "tie":
        return f"{names[0]} and {names[1]}: a tie on {objective.label} (within ±{100 * PRACTICAL:g} %), {tried}"
    unit = "requests" if objective.quantile else "rounds (a round has one value)"
    more = f"; about {judged.more_requests:,} more {unit} a setting would tell" if judged.more_requests else ""
    return (f"{names[0]} leads {names[1]} on {objective.label}, but not surely: not enough requests {tried} "
            f"({stopped}{', --budget ' + str(budget) if stopped == 'budget spent' else ''}){more}")
