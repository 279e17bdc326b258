"""Flags and settings that several subcommands share."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import ValidationError

from tui.cli.output import EXIT_USAGE, CliError, note
from tui.config import Settings, load_settings
from tui.core.urls import bad_url
from tui.meter.pool import MeterPool, default_meters
from tui.sources.http import ServerClient
from tui.sources.meter import LocalMeter, Meter

EXIT_INTERRUPTED = 130
"""Ctrl-C cut short a set amount of work (128 + SIGINT, as a shell reports it), after the command printed and saved
what it measured. A command that runs until stopped (sim, serve-*, metrics without --count) exits 0 on Ctrl-C."""


FLAG_NAMES = {"url": "--url", "meters": "--meters", "api": "--api", "model": "--model", "timeout_s": "--timeout", "bandwidth_gbs": "--bandwidth-gbs",
              "sim.gpu": "--gpu", "sim.model": "--model", "sim.time_scale": "--time-scale",
              "poll.metrics_window_s": "--window", "theme": "--theme", "otlp": "--otlp", "prometheus.url": "--prometheus", "prometheus.role_label": "--role-label"}
"""The flag each setting comes from on the command line, so an error names what was typed."""


def settings_from(args: argparse.Namespace, **extra: object) -> Settings:
    """Settings with this command's flags on top; a bad value or config file is a usage error."""
    flags = {name: getattr(args, name, None) for name in ("url", "api", "model", "timeout_s", "exact_length", "meters")}
    if flags["url"] is not None:
        check_url(flags["url"])  # as --url, before the other sources are read
    try:
        return load_settings(getattr(args, "config", None), FLAG_NAMES, **flags, **extra)
    except (ValidationError, FileNotFoundError, ValueError) as error:
        raise CliError(f"bad settings: {_one_line(error)}", EXIT_USAGE) from None


def ui_settings(args: argparse.Namespace, **extra: object) -> Settings:
    """The UI's settings with its flags on top (`add_ui_options`: the bare `phasetop`'s and `phasetop web`'s)."""
    return settings_from(args, bandwidth_gbs=args.bandwidth_gbs, theme=args.theme, otlp=args.otlp,
                         **{"poll.metrics_window_s": args.metrics_window_s}, **extra)


@contextmanager
def stop_on_first_interrupt(stop: Callable[[], None]) -> Iterator[None]:
    """Inside a running event loop: the first Ctrl-C calls `stop` (finish what is under way, keep what
    was measured); the second is an ordinary KeyboardInterrupt that abandons it."""
    loop = asyncio.get_running_loop()

    def first() -> None:
        loop.remove_signal_handler(signal.SIGINT)
        stop()

    loop.add_signal_handler(signal.SIGINT, first)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def note_short_answers(command: str, server_kind: str, timings, max_tokens: int) -> None:
    """On Ollama, which offers no ignore_eos, say once when answers stopped before max_tokens: every figure
    over "K tokens back" then has fewer (the other APIs are asked for exactly K)."""
    short = [t for t in timings if t.ok and t.output_tokens is not None and t.output_tokens < max_tokens]
    if server_kind == "ollama" and short:
        note(f"phasetop {command}: {len(short)} of {len(timings)} answers ended before {max_tokens} tokens "
             "(Ollama cannot be asked to ignore end-of-sequence)")


def check_url(url: str) -> None:
    """A usage error, before any connection, for a URL that is not http(s)://HOST[:PORT] (port 1–65535)."""
    problem = bad_url(url)
    if problem:
        raise CliError(problem, EXIT_USAGE)


def check_writable(path: Path, flag: str) -> None:
    """A usage error, before anything is measured, for a file the command writes at its end that it could not."""
    if path.is_dir():
        raise CliError(f"{flag} {path}: that is a directory; give a file name", EXIT_USAGE)
    directory = path.parent
    if not directory.is_dir():
        raise CliError(f"{flag} {path}: no such directory {directory}", EXIT_USAGE)
    if not os.access(directory, os.W_OK):
        raise CliError(f"{flag} {path}: cannot write in {directory}", EXIT_USAGE)


@contextmanager
def meters(settings: Settings, command: str, concurrency: int) -> Iterator[Callable[[ServerClient], Meter]]:
    """What times this command's requests: this process (one meter), or `settings.meters` processes sharing them."""
    count = settings.meters or default_meters(concurrency, renders=False)
    if count == 1:
        yield LocalMeter
        return
    note(f"{command}: {count} meter processes read the streams")
    pool = MeterPool(count)
    try:
        pool.start()
        yield pool.meter_for
    finally:
        pool.close()


def base_url(url: str) -> str:
    """The server root: users often paste an OpenAI base URL ending in /v1."""
    return url.rstrip("/").removesuffix("/v1")


def _one_line(error: Exception) -> str:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}"
    return str(error)
