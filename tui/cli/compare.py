"""`phasetop compare A B`: two saved runs side by side, what changed in the server, and the figures' deltas."""

from __future__ import annotations

import argparse

from tui.cli.commands import COMMANDS
from tui.cli.common import settings_from
from tui.cli.options import add_json_option
from tui.cli.output import EXIT_OK, EXIT_USAGE, CliError, emit_json, say
from tui.cli.runs_common import add_runs_dir_option, runs_dir_from
from tui.core.runs.compare_text import (changes_lines, figure_change, figure_value, schedule_lines, started_text, verdict_note,
                                   verdict_text, workload_line)
from tui.core.runs.run_record import compare_runs
from tui.core.measure.uncertainty import LEVEL, PRACTICAL
from tui.core.untrusted import one_line
from tui.runs_store import RunStoreError, load_run


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        help=COMMANDS["compare"],
        description="Compare run A (before) with run B (after): the server config that changed (engine config, "
        "simulator flags, model, context length, version), the workload flags that differ, then TTFT, ITL, TPOT, "
        "decode and prefill rates and E2E with their deltas (and throughputs when both are bench runs). "
        "A and B are run ids, unique id prefixes, or run file paths (a file `bench --save` wrote is read as a bench run). "
        f"Each change comes with its {100 * LEVEL:g} % interval and what it tells (better, worse, a tie, or not enough requests). "
        "Runs of different kinds or workloads (flags, or the presets a UI session sent and how many times) are refused "
        "unless --force.",
    )
    parser.add_argument("before", metavar="A", help="the run before: id, unique id prefix, or file path")
    parser.add_argument("after", metavar="B", help="the run after: id, unique id prefix, or file path")
    parser.add_argument("--force", action="store_true",
                        help="compare runs of different kinds or workloads (refused otherwise); the difference is the first line")
    add_runs_dir_option(parser)
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    directory = runs_dir_from(args, settings_from(args))
    try:
        before, after = load_run(args.before, directory), load_run(args.after, directory)
    except RunStoreError as error:
        raise CliError(str(error), EXIT_USAGE) from None
    comparison = compare_runs(before, after)
    if comparison["workload_differs"] and not args.force:
        raise CliError(f"run A and run B ran different workloads ({'; '.join(comparison['workload_differs'])}): their "
                       "figures would differ for that alone; --force compares them anyway", EXIT_USAGE)
    if args.json:
        emit_json(comparison)
    else:
        say(_text(comparison))
    return EXIT_OK


def _text(comparison: dict) -> str:
    lines = [line] if (line := workload_line(comparison)) else []
    for name in ("before", "after"):
        header = comparison[name]
        server = header["server"]
        where = " ".join(one_line(str(server[key]), 60) for key in ("kind", "version", "url", "model") if server.get(key))
        lines.append(f"{name:<6}  {one_line(header['id'], 60)}  {one_line(header['kind_name'], 30)}  "
                     f"{started_text(header['started'])} UTC  {where}")
    lines.append("")
    if comparison["restarted"]:
        lines.append("a different server process (restarted, or another server): its start time changed")
    lines += changes_lines("server config changed", comparison["config_diff"]) or ["server config: no change seen"]
    lines += changes_lines("workload changed", comparison["params_diff"])
    lines += schedule_lines(comparison)
    lines.append("")
    rows = [("", "before", "after", "change [interval]", "verdict")]
    for figure in comparison["figures"]:
        unit = figure["unit"]
        rows.append((figure["label"], figure_value(figure["before"], unit), figure_value(figure["after"], unit),
                     figure_change(figure), verdict_text(figure)))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        lines.append(f"{row[0]:<{widths[0]}}  {row[1]:>{widths[1]}}  {row[2]:>{widths[2]}}  {row[3]:<{widths[3]}}  {row[4]}".rstrip())
    lines.append(verdict_note(LEVEL, 100 * PRACTICAL))
    return "\n".join(lines)
