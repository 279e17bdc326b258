"""A server command a person gave phasetop to run (`phasetop --serve`, `phasetop tune`): started in its own
process group on the port its arguments name, waited on until /health answers, stopped as a group; and the
simulator phasetop started itself, served the same way (`ServedSimulator`)."""

from __future__ import annotations

import shlex
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from tui.core.serving.exit_status import exit_status, reason_line
from tui.core.serving.serve_command import ServeCommand
from tui.core.serving.server_help import help_argv
from tui.sources.servers.simulator_server import SimulatorError, SimulatorProcess
from tui.sources.servers.managed_server import REASON_LINES, ManagedServer, ServerStartError
from tui.sources.servers.vllm_server import renice_engine


HELP_TIMEOUT_S = 90.0
"""`vllm serve --help=all` imports torch first: tens of seconds on a small CPU."""


def read_help(command: ServeCommand) -> str:
    """What the server's `--help` prints (blocking: run it in a thread); empty when it cannot say. A vLLM too old
    for `--help=all` is asked `--help`."""
    argv = help_argv(command)
    for attempt in (argv, [*argv[:-1], "--help"]):
        try:
            done = subprocess.run(attempt, capture_output=True, text=True, timeout=HELP_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        if done.returncode == 0 or attempt[-1] == "--help":
            return done.stdout + done.stderr
    return ""


class CommandServer(ManagedServer):
    """The server command a person gave, as phasetop starts and stops it."""

    name = "the server"


def start_served(command: ServeCommand, timeout_s: float, url: str | None = None,
                 on_wait: Callable[[float, str], None] | None = None, renice: bool = False) -> CommandServer:
    """Start `command` and return once it is healthy at `url` (default: where its arguments say it listens);
    with `renice`, vLLM's engine and worker threads then run at nice 19 (`vllm_server.renice_engine`: on a small
    CPU host they busy-poll and starve phasetop's client; other servers have none). Raises ServerStartError:
    something else already answers there (its /health would pass for ours), the command cannot run, it exits
    while starting (with its last line; `log_tail` has more), or it is not healthy in `timeout_s`."""
    url = url or command.url
    parts = urlsplit(url)
    if listening(parts.hostname or "127.0.0.1", parts.port or 80):
        raise ServerStartError(f"something already listens on {url}: stop it, or give the command another --port")
    server = CommandServer.launch(command.argv, url, timeout_s, on_wait=on_wait)
    if renice:
        renice_engine(server.pid)
    return server


def listening(host: str, port: int) -> bool:
    """Something accepts connections at host:port now."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class RestartRefused(ServerStartError):
    """A restart's command did not start; the last good command was started again in its place (`kept`), or could
    not be either (`fallback_error` says why: then nothing runs, and `start_again` tries once more)."""

    def __init__(self, refused: ServerStartError, fallback_error: str | None = None) -> None:
        super().__init__(str(refused), refused.log_tail)
        self.fallback_error = fallback_error

    @property
    def kept(self) -> bool:
        """The last good command runs again: the user has a server while fixing the refused one."""
        return self.fallback_error is None


class _Served:
    """What every server the UI runs shares: `command` is the last one that started (a restart that fails leaves it,
    and starts it again), `first` the one started first (the flag editor shows what differs from it)."""

    command: ServeCommand
    first: ServeCommand

    def restart(self, command: ServeCommand, on_wait: Callable[[float, str], None] | None = None) -> None:
        """Stop the server and start `command` in its place (blocking: from a thread). A command this server cannot
        take raises ServerStartError before anything stops; one that does not start raises RestartRefused, once the
        last good command was started again (or tried)."""
        self._check(command)
        try:
            self._start(command, on_wait)
        except ServerStartError as refused:
            try:
                self._start(self.command, on_wait)
            except ServerStartError as also:
                raise RestartRefused(refused, str(also)) from None
            raise RestartRefused(refused) from None
        self.command = command

    def start_again(self, on_wait: Callable[[float, str], None] | None = None) -> None:
        """Start the last good command again (it exited, or a failed restart left nothing running); ServerStartError
        when it cannot."""
        self._start(self.command, on_wait)

    def _check(self, command: ServeCommand) -> None:
        """Refuse what this server cannot be restarted as (raise ServerStartError), before anything stops."""
        if command.port != self.command.port:
            raise ServerStartError(f"the port is the UI's: keep --port {self.command.port}")

    def _start(self, command: ServeCommand, on_wait: Callable[[float, str], None] | None) -> None:
        """Stop what runs and start `command`; ServerStartError when it does not come up (then nothing runs)."""
        raise NotImplementedError


class ServedCommand(_Served):
    """The server command the UI runs (`phasetop --serve`). The URL stays: the UI's clients and samplers point at it,
    so a restart keeps its port."""

    def __init__(self, command: ServeCommand, url: str, server: CommandServer, start_timeout_s: float,
                 renice: bool = False) -> None:
        self.command = command
        self.first = command
        self.url = url
        self._server: CommandServer | None = server
        self._start_timeout_s = start_timeout_s
        self._renice = renice
        """Renice each restart's engine as the first start's was (see `start_served`)."""

    @property
    def running(self) -> bool:
        return self._server is not None and self._server.running

    @property
    def pid(self) -> int | None:
        """The running command's process (its group's leader); None while none runs."""
        return self._server.pid if self._server is not None else None

    def exit_line(self) -> str:
        """How the command ended and the last line it wrote ("exit status 1; last said: …")."""
        server = self._server
        if server is None:
            return "not running"
        status = "still running" if server.running else exit_status(server.process.returncode)
        last = reason_line(server.log_tail(REASON_LINES))
        return f"{status}; last said: {last}" if last else status

    def log_tail(self, lines: int) -> str:
        return self._server.log_tail(lines) if self._server is not None else ""

    def _start(self, command: ServeCommand, on_wait: Callable[[float, str], None] | None) -> None:
        self.stop()
        self._server = start_served(command, self._start_timeout_s, url=self.url, on_wait=on_wait, renice=self._renice)

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


SIMULATOR_PROGRAM = (sys.executable, "-m", "tui", "sim")


class ServedSimulator(_Served):
    """The simulator phasetop started, as a served command: its flags edited and it started again with them on its
    port, so the tuning loop (f, o, before → after) runs in the demo with no server of one's own. The child stays
    the one `SimulatorProcess` watches (R starts it again once it has exited)."""

    def __init__(self, simulator: SimulatorProcess, args: Sequence[str]) -> None:
        self._simulator = simulator
        self.url = simulator.url
        self.command = ServeCommand((*SIMULATOR_PROGRAM, "--port", str(urlsplit(simulator.url).port), *args))
        self.first = self.command

    @property
    def running(self) -> bool:
        return self._simulator.running

    @property
    def pid(self) -> int | None:
        return self._simulator.pid

    def exit_line(self) -> str:
        return self._simulator.exit_line()

    def log_tail(self, lines: int) -> str:
        return "\n".join(self._simulator.log_text().splitlines()[-lines:])

    def _check(self, command: ServeCommand) -> None:
        if command.argv[:len(SIMULATOR_PROGRAM)] != SIMULATOR_PROGRAM:
            raise ServerStartError(f"this is phasetop's simulator: keep `{shlex.join(SIMULATOR_PROGRAM)}` and change its flags")
        super()._check(command)

    def _start(self, command: ServeCommand, on_wait: Callable[[float, str], None] | None) -> None:
        try:
            self._simulator.restart(args=_without_port(command.argv[len(SIMULATOR_PROGRAM):]))
        except SimulatorError as error:
            raise ServerStartError(str(error), self.log_tail(20)) from None

    def stop(self) -> None:
        self._simulator.stop()


def _without_port(args: Sequence[str]) -> list[str]:
    """The flags less `--port P` (the restart keeps the port it has)."""
    kept, skip = [], False
    for word in args:
        if skip:
            skip = False
        elif word == "--port":
            skip = True
        elif not word.startswith("--port="):
            kept.append(word)
    return kept


ServedProcess = ServedCommand | ServedSimulator
"""What the UI's restarts, flag editor and log work on: a command phasetop was given, or its own simulator."""
