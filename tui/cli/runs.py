"""`phasetop runs`: the saved runs (probe, bench, sweep, traffic, UI session), oldest first, and a note for each file
that is not one."""

from __future__ import annotations

import argparse

from tui.cli.commands import COMMANDS
from tui.cli.common import settings_from
from tui.cli.options import add_json_option
from tui.cli.output import EXIT_OK, EXIT_USAGE, CliError, emit_json, note, say
from tui.cli.runs_common import add_runs_dir_option, runs_dir_from
from tui.core.runs.compare_text import started_text
from tui.core.untrusted import one_line
from tui.runs_store import RunListing, RunStoreError, scan_runs


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "runs",
        help=COMMANDS["runs"],
        description="List the runs that probe, bench, sweep, traffic and the UI's sessions saved, oldest first: a sweep "
        "named by its experiment, a UI session with what it sent. Give two ids (or unique "
        "prefixes) to `phasetop compare`. A file in the runs dir that is not a readable run is named on stderr, "
        "with the reason, and skipped.",
    )
    add_runs_dir_option(parser)
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    directory = runs_dir_from(args, settings_from(args))
    try:
        listing = scan_runs(directory)
    except RunStoreError as error:
        raise CliError(str(error), EXIT_USAGE) from None
    note_odd_files(listing)
    headers = listing.headers
    if args.json:
        emit_json(headers)
    elif not headers:
        say(f"no saved runs in {directory}" + (f" ({len(listing.skipped)} unreadable files skipped)" if listing.skipped else ""))
    else:
        say(_table(headers))
    return EXIT_OK


def note_odd_files(listing: RunListing) -> None:
    """One stderr line per file skipped ("skipped runs/x.json: requests[0] is …") and per id held twice."""
    for error in listing.skipped:
        note(f"skipped {one_line(str(error.path), 200)}: {one_line(error.reason, 300)}")
    for first, later in listing.duplicates():
        note(f"{one_line(later['path'], 200)} holds the id of {one_line(first['path'], 200)} "
             f"({one_line(str(first['id']), 60)}): both listed; give compare a path to pick one")


def _table(headers: list[dict]) -> str:
    rows = [("id", "kind", "started (UTC)", "server", "summary")]
    for header in headers:
        server = header["server"]
        where = " ".join(one_line(str(server[key]), 60) for key in ("url", "model") if server.get(key))
        rows.append((one_line(header["id"], 60), one_line(header["kind_name"], 30), started_text(header["started"]), where, one_line(header["summary"], 160)))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)) + "  " + row[4] for row in rows)
