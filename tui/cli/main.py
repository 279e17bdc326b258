"""The headless subcommands of `phasetop`: the parser and the dispatcher (the UI starts in `tui.entry`)."""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import sys
from typing import NoReturn

from tui import __version__
from tui.cli.commands import COMMANDS, module_of
from tui.cli.options import MAX_METERS, METERS_HELP, add_server_options, whole_number
from tui.cli.output import EXIT_USAGE, CliError, note
from tui.core.engines.known import titles

GLOBAL_ONLY = ("--config", "-h", "--help", "--version")
"""Flags before a subcommand that stay there; every other one is the subcommand's (see `hoist_flags`)."""


class Parser(argparse.ArgumentParser):
    """argparse with a usage error in one line and a hint, not its usage block (its subcommands' parsers too)."""

    def error(self, message: str) -> NoReturn:
        note(f"{self.prog}: {self.reworded(message)}")
        raise SystemExit(EXIT_USAGE)

    def reworded(self, message: str) -> str:
        typo = re.match(r"argument COMMAND: invalid choice: '(.*)' \(choose from", message)
        if typo:
            close = difflib.get_close_matches(typo[1], self.commands(), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            return f"unknown command {typo[1]!r}{hint}; {self.prog} --help lists them"
        return f"{message}; {self.prog} --help lists the options"

    def commands(self) -> dict[str, argparse.ArgumentParser]:
        """The subcommands' parsers by name (none for a subcommand's own parser)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}

    def refuse_unknown(self, extras: list[str]) -> NoReturn:
        """`phasetop probe --bogus`: one line naming the flag, with the closest one this parser has."""
        flags = [s for action in self._actions for s in action.option_strings if s.startswith("--")]
        first = next((e for e in extras if e.startswith("-")), extras[0])
        close = difflib.get_close_matches(first.partition("=")[0], flags, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        if first.partition("=")[0] == "--config" and self.prog != "phasetop":
            hint = f" (it goes before the command: phasetop --config FILE {self.prog.removeprefix('phasetop ')})"
        what = "unknown option" if first.startswith("-") else "unexpected argument"
        note(f"{self.prog}: {what} {first!r}{hint}; {self.prog} --help lists the options")
        raise SystemExit(EXIT_USAGE)


def hoist_flags(parser: Parser, argv: list[str]) -> list[str]:
    """`phasetop --url X probe` means `phasetop probe --url X`: flags before a subcommand go after it, where its
    own parser checks them (a flag it lacks is then one line, never silently dropped). `--config` stays global.

    Anything this cannot read (an abbreviation, an unknown flag) leaves argv as it is, for argparse to report.
    """
    actions = {s: a for a in parser._actions for s in a.option_strings}
    kept: list[str] = []
    moved: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if not token.startswith("-"):
            if token in parser.commands() and moved:
                return [*kept, token, *moved, *argv[i + 1:]]
            return argv
        name, eq, _ = token.partition("=")
        action = actions.get(name)
        if action is None or name in GLOBAL_ONLY and name != "--config":
            return argv
        width = 1 if eq or action.nargs == 0 else 2
        (kept if name in GLOBAL_ONLY else moved).extend(argv[i:i + width])
        i += width
    return argv


def add_ui_options(ui: argparse._ArgumentGroup) -> None:
    """The UI's options: the bare `phasetop`'s, and `phasetop web`'s, which hands them to each tab's UI."""
    add_server_options(ui)
    ui.add_argument("--bandwidth-gbs", type=float, metavar="B",
                    help="memory bandwidth of the server's device for the decode ceiling, GB/s (default: NVML's GPU, else the CPU row)")
    ui.add_argument("--window", type=float, metavar="S", dest="metrics_window_s",
                    help="seconds the metrics pane's quantiles and tok/s span, a rolling window (default 30)")
    ui.add_argument("--no-save", action="store_true", help="do not save UI sessions, loads and experiments as runs")
    ui.add_argument("--serve", metavar="CMD", help="start this server command (quoted as for a shell) in its own process "
                    "group, wait for its /health at its --port (or --url), and open the UI on it; q stops it")
    ui.add_argument("--start-timeout", type=float, default=600.0, metavar="S", dest="start_timeout_s",
                    help="longest wait for --serve's /health (default 600 s)")
    ui.add_argument("--renice", action="store_true",
                    help="with --serve: vLLM's engine and worker threads at nice 19 once it is up (and after each "
                    "restart), so on a small CPU host they do not starve phasetop's client")
    ui.add_argument("--otlp", metavar="[HOST:]PORT",
                    help="receive the server's OpenTelemetry spans here (OTLP/HTTP protobuf at /v1/traces; a port on "
                    "127.0.0.1, or HOST:PORT) for the traffic view (T): every request served, split into queue, prefill "
                    "and decode. Start vLLM with --otlp-traces-endpoint http://HOST:PORT/v1/traces and "
                    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf. phasetop's own simulator needs none")
    ui.add_argument("--meters", type=whole_number(1, MAX_METERS, "meter count"), metavar="N",
                    help=f"{METERS_HELP}; the UI's are always processes apart from the one that draws")
    ui.add_argument("--theme", help="the UI's colours: phasetop-projector (bright on black, for a projector) or a "
                    "Textual theme (default: settings, else textual-dark); one picked in the UI is remembered")


def version_text() -> str:
    """"phasetop 0.1.0 (Python 3.11.7)" over "from /home/me/.local/pipx/venvs/phasetop/lib/python3.11/site-packages/tui":
    which copy runs, where a checkout's and an installed one could both be on PATH. The path has a line of its own,
    as printed (argparse's own version action wraps to the terminal and broke the line at 80 columns mid-parenthesis)."""
    import tui

    return f"phasetop {__version__} (Python {sys.version.split()[0]})\nfrom {os.path.dirname(tui.__file__)}"


class _Version(argparse.Action):
    """--version: `version_text` as it is, then exit 0."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(version_text())
        parser.exit()


def build_parser(chosen: str | None = None) -> Parser:
    """The whole parser, with only the `chosen` command's own (its module imported); every other command is its
    name and one-line help, so `phasetop --help` and any one command load no other command's stack."""
    parser = Parser(
        prog="phasetop",
        description="Watch LLM inference split into prefill (time to first token) and decode (tokens per second).",
    )
    parser.add_argument("--version", action=_Version, help="show the version, the Python and where it runs from, and exit")
    parser.add_argument("--config", metavar="FILE", help="TOML settings file (default: the user config dir)")
    add_ui_options(parser.add_argument_group("the UI (no subcommand)"))
    fleet = parser.add_argument_group("the fleet view (no subcommand)")
    fleet.add_argument("--prometheus", nargs="?", const="", metavar="URL",
                       help="open the fleet screen on this Prometheus (bare: settings' prometheus.url): every "
                       f"{titles()} instance it scrapes, one row each; Enter opens one in the main screen")
    fleet.add_argument("--role-label", metavar="NAME", help="with --prometheus: a label naming each instance's role "
                       "(prefill, decode) for the pools")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, summary in COMMANDS.items():
        if name == chosen:
            importlib.import_module(module_of(name)).register(subparsers)
        else:
            subparsers.add_parser(name, help=summary, add_help=False)
    return parser


def chosen_command(words: list[str]) -> str | None:
    """The command these words run, read by the parser with every command bare (a usage error, `--help` and
    `--version` are answered here as the whole parser would); None for none."""
    names = build_parser()
    return names.parse_known_args(hoist_flags(names, words))[0].command


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line read, flags before a subcommand moved after it; a usage error exits 2 with one line."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(chosen_command(words))
    args, extras = parser.parse_known_args(hoist_flags(parser, words))
    if extras:
        parser.commands().get(args.command, parser).refuse_unknown(extras)
    return args


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand (the headless entry used by tests and scripts)."""
    args = parse_args(argv)
    if args.command is None:
        build_parser().print_help(sys.stderr)
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
