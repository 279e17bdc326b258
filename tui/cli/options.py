"""The options several commands share, declared for argparse: importing this loads nothing but argparse, so a parser
is built without the stack a command runs on."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout (messages go to stderr)")


def add_server_options(parser: argparse.ArgumentParser) -> None:
    """--url, --api, --model, --timeout; the API key comes from PHASETOP_API_KEY or the config file."""
    parser.add_argument("--url", help="server base URL (default: settings, else http://127.0.0.1:8000)")
    parser.add_argument("--api", choices=("auto", "openai", "ollama", "llamacpp"), help="wire API (default: auto-detect)")
    parser.add_argument("--model", help="model name (default: the server's first model)")
    parser.add_argument("--timeout", type=float, dest="timeout_s", metavar="S",
                        help="deadline of a whole answer (a JSON document, /metrics, a stream's head) and longest "
                        "silence inside a stream, seconds (default 30)")
    parser.add_argument(
        "--allow-eos", action="store_false", dest="exact_length", default=None,
        help="let the model stop before --max-tokens (default: ask for exactly that many with ignore_eos/min_tokens; "
        "Ollama has no such option)",
    )


def whole_number(low: int, high: int, what: str) -> Callable[[str], int]:
    """argparse's type for a whole number from `low` to `high`; `what` names it in the one-line error."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {what} ({low}–{high})") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{what} {value} is out of range {low}–{high}")
        return value
    return parse


MAX_METERS = 64


METERS_HELP = ("processes that read and time the token streams, sharing them (default: settings' meters, else as many as "
               "the streams need, at most the cores free)")


def add_meter_option(parser) -> None:
    """--meters N: the processes that read and time the token streams."""
    parser.add_argument("--meters", type=whole_number(1, MAX_METERS, "meter count"), metavar="N",
                        help=f"{METERS_HELP}; 1 is this process itself, more start that many meter processes")


def port_number(text: str) -> int:
    """argparse's type for a port to listen on: 0 (pick a free one) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0–65535)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is out of range (0–65535; 0 picks a free port)")
    return port
