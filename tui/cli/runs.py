"""`phasetop runs`: the saved runs (probe, bench, sweep), oldest first."""

from __future__ import annotations

import argparse

from tui.cli.common import add_json_option, settings_from
from tui.cli.output import EXIT_OK, emit_json, say
from tui.cli.runs_common import add_runs_dir_option, runs_dir_from
from tui.core.compare_text import started_text
from tui.core.untrusted import one_line
from tui.runs_store import list_runs


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "runs",
        help="list saved runs: id, kind, when, which server, one-line summary",
        description="List the runs that probe, bench and sweep saved, oldest first. Give two ids (or unique "
        "prefixes) to `phasetop compare`.",
    )
    add_runs_dir_option(parser)
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    directory = runs_dir_from(args, settings_from(args))
    headers = list_runs(directory)
    if args.json:
        emit_json(headers)
    elif not headers:
        say(f"no saved runs in {directory}")
    else:
        say(_table(headers))
    return EXIT_OK


def _table(headers: list[dict]) -> str:
    rows = [("id", "kind", "started (UTC)", "server", "summary")]
    for header in headers:
        server = header["server"]
        where = " ".join(one_line(str(server[key]), 60) for key in ("url", "model") if server.get(key))
        rows.append((one_line(header["id"], 60), one_line(str(header["kind"]), 10), started_text(header["started"]), where, one_line(header["summary"], 160)))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)) + "  " + row[4] for row in rows)
