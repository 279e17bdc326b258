"""`phasetop tune`: start the server once per setting, run the same load on each, and say which setting is best
(the loop is `tui.workflows.tune`; this command reads its flags and prints its table and verdict)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any, TypeVar

from tui.cli.commands import COMMANDS
from tui.cli.common import meters, settings_from
from tui.cli.options import add_json_option, add_meter_option
from tui.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError, emit_json, note, say
from tui.cli.runs_common import add_runs_options, save_run_from_cli
from tui.core.measure.uncertainty import LEVEL, PRACTICAL
from tui.core.serving.serve_command import CommandError, ServeCommand, grid, parse_vary
from tui.core.serving.tune import OBJECTIVES, Objective, Standing
from tui.core.untrusted import one_line, redact_all
from tui.workflows.tune import COLUMNS, TUNABLE, Budget, LoadShape, TuneHooks, TuneParams, TuneWorkload, tune

DEFAULT_START_TIMEOUT_S = 600.0
"""vLLM on a GPU can take minutes to load a large model and capture its graphs."""
T = TypeVar("T")


def _argument(parse: Callable[[str], T]) -> Callable[[str], T]:
    """A parser's ValueError as argparse's own one-line usage error."""
    def read(text: str) -> T:
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return read


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
    parser.add_argument("--workload", type=_argument(TuneWorkload.parse), default=TuneWorkload("bench"), metavar="bench|sweep:WHAT[:N,N,…]",
                        help="what runs on each setting: bench (the load below; default), or one of `phasetop sweep`'s "
                        f"experiments ({' | '.join(TUNABLE)}) with its values, e.g. sweep:interference:4000 or "
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
    parser.add_argument("--budget", type=_argument(Budget.parse), default=None, metavar="N|Ss",
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


def run(args: argparse.Namespace) -> int:
    params = _params(args)
    settings = settings_from(args)
    note(f"tune: {len(params.points)} settings of `{params.command}` at {params.command.url}, {params.what_runs()} "
         f"each, best by {params.objective.label}")
    hooks = TuneHooks(note=note, save=lambda run: bool(save_run_from_cli(args, settings, run)),
                      meters=lambda streams: meters(settings, "tune", streams))
    tuned = tune(params, settings, hooks)
    where = tuned.standing
    document = redact_all({"serve": str(params.command), "optimize": params.objective.name, "best": where.leader,
                           "rows": tuned.rows, "verdict": _verdict_json(where, tuned.repeats, tuned.stopped)})
    if args.json:
        emit_json(document)
    else:
        say("\n".join(filter(None, (table(tuned.rows, params.objective, where),
                                    verdict_line(tuned.rows, params.objective, where, tuned.repeats, tuned.stopped,
                                                 params.repeat_budget)))))
    if where.leader is None:
        raise CliError("no setting was measured: every start failed (the rows say why)", EXIT_FAILED)
    return EXIT_OK


def _verdict_json(where: Standing, repeats: int, stopped: str) -> dict[str, Any]:
    judged = where.judged.to_json() if where.judged is not None else {}
    return {"leader": where.leader, "runner_up": where.runner_up, "separated": where.separated,
            **{k: judged.get(k) for k in ("verdict", "ci_low", "ci_high", "level", "more_requests")},
            "repeats": repeats, "stopped": stopped}


def _params(args: argparse.Namespace) -> TuneParams:
    try:
        command = ServeCommand.parse(args.serve)
        _ = command.url  # a --port that is not a port is a usage error now, not at the first start
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
    load = LoadShape(args.num_prompts, args.max_concurrency, args.request_rate, args.prompt_tokens, args.max_tokens)
    slo_s = (None if args.slo_ttft_ms is None else args.slo_ttft_ms / 1e3,
             None if args.slo_tpot_ms is None else args.slo_tpot_ms / 1e3)
    return TuneParams(command, tuple(grid(varied)), objective, args.workload, load, slo_s, args.start_timeout,
                      args.budget, args.renice)


def table(rows: list[dict[str, Any]], objective: Objective, where: Standing) -> str:
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


def verdict_line(rows: list[dict[str, Any]], objective: Objective, where: Standing, repeats: int, stopped: str, budget: Budget) -> str:
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
