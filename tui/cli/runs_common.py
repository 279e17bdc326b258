"""Flags and helpers for subcommands that save runs (probe, bench, sweep) or read them (runs, compare)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tui.cli.output import note
from tui.config import Settings
from tui.runs_store import default_runs_dir, save_run


def add_runs_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runs-dir", metavar="DIR",
        help="where saved runs live (default: PHASETOP_RUNS_DIR, the config file's runs_dir, else the user data dir)",
    )


def add_runs_options(parser: argparse.ArgumentParser) -> None:
    """--runs-dir and --no-save, for commands that save their run."""
    add_runs_dir_option(parser)
    parser.add_argument("--no-save", action="store_true", help="do not save this run")


def runs_dir_from(args: argparse.Namespace, settings: Settings) -> Path:
    """--runs-dir, else the runs_dir setting, else the user data dir's `runs`."""
    return default_runs_dir(getattr(args, "runs_dir", None) or settings.runs_dir)


def save_run_from_cli(args: argparse.Namespace, settings: Settings, run: dict) -> Path | None:
    """Save the run unless --no-save; a failure is one line on stderr and leaves the command's output standing."""
    if getattr(args, "no_save", False):
        return None
    try:
        path = save_run(run, runs_dir_from(args, settings))
    except (OSError, ValueError) as error:
        note(f"run not saved: {error}")
        return None
    note(f"saved run {run['id']}")
    return path
