"""`phasetop compare A B`: two saved runs side by side, what changed in the server, and the figures' deltas."""

from __future__ import annotations

import argparse

from tui.cli.common import add_json_option, settings_from
from tui.cli.output import EXIT_OK, EXIT_USAGE, CliError, emit_json
from tui.cli.runs import started_text
from tui.cli.runs_common import add_runs_dir_option, runs_dir_from
from tui.core.runs import compare_runs
from tui.core.sse import one_line
from tui.runs_store import RunStoreError, load_run


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="two saved runs side by side: the server flags that changed, TTFT/ITL/decode before and after",
        description="Compare run A (before) with run B (after): the server config that changed (engine config, "
        "simulator flags, model, context length, version), the workload flags that differ, then TTFT, ITL, TPOT, "
        "decode and prefill rates and E2E with their deltas (and throughputs when both are bench runs). "
        "A and B are run ids, unique id prefixes, or run file paths.",
    )
    parser.add_argument("before", metavar="A", help="the run before: id, unique id prefix, or file path")
    parser.add_argument("after", metavar="B", help="the run after: id, unique id prefix, or file path")
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
    if args.json:
        emit_json(comparison)
    else:
        print(_text(comparison))
    return EXIT_OK


def _text(comparison: dict) -> str:
    lines = []
    for name in ("before", "after"):
        header = comparison[name]
        server = header["server"]
        where = " ".join(one_line(str(server[key]), 60) for key in ("kind", "version", "url", "model") if server.get(key))
        lines.append(f"{name:<6}  {one_line(header['id'], 60)}  {started_text(header['started'])} UTC  {where}")
    lines.append("")
    if comparison["restarted"]:
        lines.append("a different server process (restarted, or another server): its start time changed")
    lines += _changes("server config changed", comparison["config_diff"]) or ["server config: no change seen"]
    lines += _changes("workload changed", comparison["params_diff"])
    lines.append("")
    rows = [("", "before", "after", "delta")]
    for figure in comparison["figures"]:
        unit = figure["unit"]
        rows.append((
            figure["label"],
            _value(figure["before"], unit),
            _value(figure["after"], unit),
            _delta(figure["delta"], figure["delta_pct"], unit),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        lines.append(f"{row[0]:<{widths[0]}}  {row[1]:>{widths[1]}}  {row[2]:>{widths[2]}}  {row[3]}".rstrip())
    return "\n".join(lines)


def _changes(title: str, diff: list[dict]) -> list[str]:
    if not diff:
        return []
    width = max(len(row["key"]) for row in diff)
    return [f"{title}:"] + [
        f"  {one_line(row['key'], 60):<{width}}  {_setting(row['before'])} → {_setting(row['after'])}" for row in diff
    ]


def _setting(value: str | None) -> str:
    return "(none)" if value is None else one_line(value, 80)


def _scaled(value: float, unit: str) -> tuple[float, str, int]:
    """Seconds are shown in ms; rates keep their unit."""
    if unit == "s":
        return value * 1000, "ms", 2
    return value, unit, 2 if unit == "req/s" else 1


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    shown, shown_unit, digits = _scaled(value, unit)
    return f"{shown:,.{digits}f} {shown_unit}"


def _delta(delta: float | None, delta_pct: float | None, unit: str) -> str:
    if delta is None:
        return "-"
    shown, shown_unit, digits = _scaled(delta, unit)
    percent = f" ({delta_pct:+.1f} %)" if delta_pct is not None else ""
    return f"{shown:+,.{digits}f} {shown_unit}{percent}"
