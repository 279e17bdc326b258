"""What `serve-llamacpp` and `serve-vllm` share once their server is up: announce it, then serve until
Ctrl-C or SIGTERM (or until the UI quits, with --ui), and stop it whatever happens."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from tui.cli.output import EXIT_OK, CliError, emit_json, note, say
from tui.sources.servers.managed_server import ManagedServer


def serve_until_stopped(server: ManagedServer, command: str, ready_prefix: str, described: dict, detail: str,
                        as_json: bool, ui: bool) -> int:
    """`described` goes out as the JSON document (with url and pid), else one `ready_prefix URL` line on stdout;
    `detail` is said on stderr. The server is stopped on the way out, always."""
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        if as_json:
            emit_json({"url": server.url, "pid": server.pid, **described})
        else:
            say(f"{ready_prefix}{server.url}")
        note(f"phasetop {command}: pid {server.pid}{detail}; measure it with `phasetop --url {server.url}`; Ctrl-C stops")
        if ui:
            subprocess.run([sys.executable, "-m", "tui", "--url", server.url], check=False)
            return EXIT_OK
        while server.running:
            time.sleep(0.5)
        raise CliError(f"{server.name} exited by itself (status {server.process.returncode}): {server.log_tail(1)}")
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        server.stop()


def _interrupt(signum, frame) -> None:
    """SIGTERM stops the server the same way Ctrl-C does."""
    raise KeyboardInterrupt
