"""The headless subcommands of `phasetop`: the parser and the dispatcher (the UI starts in `tui.entry`)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from tui import __version__
from tui.cli.common import add_server_options
from tui.cli.output import EXIT_USAGE, CliError, note

SUBCOMMANDS = ("ceiling", "probe", "sim", "metrics", "gpu", "serve_llamacpp", "serve_vllm", "runs", "compare", "sweep", "bench")
"""Modules of `tui.cli`, each with `register(subparsers)` and a `run(args)` handler."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="phasetop",
        description="Watch LLM inference split into prefill (time to first token) and decode (tokens per second).",
    )
    parser.add_argument("--version", action="version", version=f"phasetop {__version__}")
    parser.add_argument("--config", metavar="FILE", help="TOML settings file (default: the user config dir)")
    ui = parser.add_argument_group("the UI (no subcommand)")
    add_server_options(ui)
    ui.add_argument("--bandwidth-gbs", type=float, metavar="B",
                    help="memory bandwidth of the server's device for the decode ceiling, GB/s (default: NVML's GPU, else the CPU row)")
    ui.add_argument("--no-save", action="store_true", help="do not save UI sessions, loads and experiments as runs")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"tui.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand (the headless entry used by tests and scripts)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return run_command(args)


def run_command(args: argparse.Namespace) -> int:
    """Call the subcommand's handler; every failure becomes one line on stderr and an exit code."""
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
