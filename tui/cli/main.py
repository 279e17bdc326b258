"""`phasetop`: the UI with no subcommand, else one headless subcommand."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from tui import __version__
from tui.cli.output import EXIT_USAGE, CliError, note

SUBCOMMANDS = ("ceiling", "probe", "sim", "metrics", "gpu")
"""Modules of `tui.cli`, each with `register(subparsers)` and a `run(args, settings)` handler."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="phasetop",
        description="Watch LLM inference split into prefill (time to first token) and decode (tokens per second).",
    )
    parser.add_argument("--version", action="version", version=f"phasetop {__version__}")
    parser.add_argument("--config", metavar="FILE", help="TOML settings file (default: the user config dir)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"tui.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        note("phasetop: the interactive UI is not built yet; use a subcommand above.")
        return EXIT_USAGE
    try:
        return args.handler(args)
    except CliError as error:
        note(f"phasetop {args.command}: {error}")
        return error.exit_code
    except KeyboardInterrupt:
        note(f"phasetop {args.command}: interrupted")
        return 130
    except Exception as error:  # the last guard: one line, never a traceback
        if os.environ.get("PHASETOP_DEBUG"):
            raise
        note(f"phasetop {args.command}: internal error: {type(error).__name__}: {error} (PHASETOP_DEBUG=1 shows the traceback)")
        return 70
