"""`phasetop web`: the UI in a browser. textual-serve runs one UI process per tab (with no --url, each on its own
simulator), stopped with the tab; the API key stays in the server's processes, passed by the environment."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import shlex
import socket
import sys
import webbrowser
from pathlib import Path

from tui.cli.commands import COMMANDS
from tui.cli.common import ui_settings
from tui.cli.options import whole_number
from tui.cli.main import add_ui_options
from tui.cli.output import EXIT_USAGE, CliError, note

DEFAULT_PORT = 8080
DEFAULT_FONT_SIZE_PX = 16
"""textual-serve's own default; a projector wants more (`--font-size 22`: fewer, larger cells)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "web", help=COMMANDS["web"],
        description="Serve phasetop's UI to a browser with textual-serve: each tab runs its own phasetop (with no "
        "--url, on its own simulator), stopped when the tab closes. It listens on loopback; the page has no login. "
        "From another machine: ssh -L 8080:127.0.0.1:8080 HOST, then open http://127.0.0.1:8080. With --serve, each "
        "tab starts the server command too: for one on a fixed port, keep to one tab, or start it once and give --url.")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; any other is reachable by anyone on its network)")
    parser.add_argument("--port", type=whole_number(1, 65535, "port"), default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.add_argument("--font-size", type=whole_number(6, 96, "font size"), default=DEFAULT_FONT_SIZE_PX, metavar="PX",
                        help=f"the page's font size in pixels (default {DEFAULT_FONT_SIZE_PX}; a page's ?fontsize=N wins)")
    parser.add_argument("--open", action="store_true", dest="open_browser",
                        help="open the page in this machine's browser too, where there is a display for one")
    ui = parser.add_argument_group("each tab's UI (as for phasetop with no command)")
    add_ui_options(ui)
    parser.set_defaults(handler=run, ui_options=tuple(ui._group_actions))


def run(args: argparse.Namespace) -> int:
    settings = ui_settings(args)  # a bad setting is one line here, not one per tab
    check_free(args.host, args.port)
    from tui.web.server import WebServer  # aiohttp and textual-serve load only here

    url = page_url(args.host, args.port, args.font_size)
    if not is_loopback(args.host):
        note(f"phasetop web: warning: listening on {args.host}: the page has no login, and whoever reaches port "
             f"{args.port} drives this UI and the server it talks to. To view a remote host, keep the loopback "
             f"default and run ssh -L {args.port}:127.0.0.1:{args.port} HOST on your machine.")

    def ready() -> None:
        print(url, flush=True)
        where = "" if args.url or args.serve else f", on its own simulator when nothing answers at {settings.url}"
        note(f"phasetop web: open {url} (each tab runs its own phasetop{where}; Ctrl-C stops)")
        if args.open_browser:
            open_browser(url)

    server = WebServer(ui_command(args), args.host, args.port, args.font_size, ready)
    try:
        server.serve()
    except OSError as error:  # taken between the check and the bind
        raise CliError(f"cannot listen on {args.host}:{args.port}: {error.strerror or error}") from None
    return 0


def ui_command(args: argparse.Namespace) -> str:
    """The shell command textual-serve runs per tab: this Python's `-m tui` with the UI options that were given.

    It holds no secret: the API key reaches the UI as it reached this process (PHASETOP_API_KEY, .env, the
    config file), and `exec` leaves no shell between textual-serve and the UI.
    """
    words = [sys.executable, "-m", "tui"]
    if args.config:
        words += ["--config", str(Path(args.config).resolve())]
    for action in args.ui_options:
        value = getattr(args, action.dest)
        if value != action.default:
            flag = action.option_strings[-1]
            words += [flag] if action.nargs == 0 else [flag, str(value)]
    return "exec " + shlex.join(words)


def check_free(host: str, port: int) -> None:
    """One line, before anything starts, for a port another server holds or an address this host cannot take."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as error:
        raise CliError(f"--host {host}: {error.strerror}", EXIT_USAGE) from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp binds: a port in TIME_WAIT is free
        try:
            probe.bind(address)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise CliError(f"port {port} on {host} is in use (another server?); pick another with --port") from None
            raise CliError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def page_url(host: str, port: int, font_size: int) -> str:
    """The address to open: a wildcard address names this host; a font size other than the default is in the URL."""
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    elif ":" in host:
        host = f"[{host}]"
    query = "" if font_size == DEFAULT_FONT_SIZE_PX else f"/?fontsize={font_size}"
    return f"http://{host}:{port}{query}"


def open_browser(url: str) -> None:
    """A desktop's browser; on a headless host (no display) Python's would be a text browser in this terminal."""
    if sys.platform in ("darwin", "win32") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        webbrowser.open(url)
    else:
        note("phasetop web: no display here to open a browser on; open the URL above")
