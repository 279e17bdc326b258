"""A server process phasetop starts, waits for and stops: llama.cpp's llama-server, real vLLM.

It runs in a process group of its own (vLLM is three processes: API server, EngineCore, Worker), its
output goes to a temporary log file, it is ready when `GET /health` answers 200, and it is stopped as a
group: SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence

import httpx

from tui.core.serving.exit_status import reason_line
from tui.spawn import popen

LOG_TAIL_LINES = 5
"""Lines of its log a failed start keeps for a person to read."""
REASON_LINES = 20
"""The last lines searched for why a server gave up: llama-server prints its usage (some 8 lines) after its error."""


class ServerStartError(RuntimeError):
    """The server could not start; the message is one line a person can act on, `log_tail` the last lines it wrote."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class ManagedServer:
    """A running server: `.url`, `.pid` (the group's leader), `.stop()`, `.kill()`, and a context manager."""

    name = "server"
    """What the messages call it."""
    stop_grace_s = 10.0

    def __init__(self, process: subprocess.Popen, url: str, log_file) -> None:
        self.process = process
        self.url = url
        self._log = log_file

    @classmethod
    def launch(
        cls,
        command: Sequence[str],
        url: str,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        on_wait: Callable[[float, str], None] | None = None,
    ):
        """Start `command` in its own process group and return once `url`/health answers 200.

        `on_wait(elapsed_s, last_log_line)` is called about once a second while it starts.
        """
        log_file = tempfile.TemporaryFile(mode="w+b")
        try:
            process = popen(
                list(command), stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                env={**os.environ, **env} if env else None, start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        except OSError as error:  # not executable, wrong architecture
            log_file.close()
            raise ServerStartError(f"cannot run {command[0]}: {error.strerror or error}") from None
        server = cls(process, url, log_file)
        try:
            server._wait_healthy(timeout_s, on_wait)
        except BaseException:
            server.stop()
            raise
        return server

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 5) -> str:
        """The last lines the server wrote (its log goes to a temporary file)."""
        if self._log.closed:
            return ""
        self._log.seek(0, os.SEEK_END)
        size = self._log.tell()
        self._log.seek(max(size - 64 * 1024, 0))
        text = self._log.read().decode(errors="replace").strip()
        return "\n".join(text.splitlines()[-lines:])

    def _wait_healthy(self, timeout_s: float, on_wait: Callable[[float, str], None] | None) -> None:
        """Poll /health: connection refused, then 503 while loading, then 200."""
        started = time.monotonic()
        next_report = started + 1.0
        with httpx.Client(timeout=2.0) as client:
            while True:
                if self.process.poll() is not None:
                    last = reason_line(self.log_tail(REASON_LINES)) or f"exit status {self.process.returncode}"
                    raise ServerStartError(f"{self.name} exited while starting (status {self.process.returncode}): {last}",
                                           self.log_tail(LOG_TAIL_LINES))
                try:
                    if client.get(f"{self.url}/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                now = time.monotonic()
                if now - started > timeout_s:
                    raise ServerStartError(f"{self.name} was not healthy after {timeout_s:.0f} s: {self.log_tail(1)}",
                                           self.log_tail(LOG_TAIL_LINES))
                if on_wait is not None and now >= next_report:
                    on_wait(now - started, self.log_tail(1))
                    next_report = now + 1.0
                time.sleep(0.1)

    def stop(self, timeout_s: float | None = None) -> None:
        """SIGTERM to the group, and SIGKILL if it has not exited within the grace period."""
        if self.process.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self.process.wait(self.stop_grace_s if timeout_s is None else timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        self._signal_group(signal.SIGKILL)  # any child the leader left behind
        self._log.close()

    def kill(self) -> None:
        """SIGKILL to the group, as a crash would end it: streams in flight are cut mid-answer."""
        if self.process.poll() is None:
            self._signal_group(signal.SIGKILL)
            self.process.wait()

    def _signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.process.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when the parent dies, so no server outlives a crashed test run.

    (Linux ties this to the thread that started the child: start servers from a long-lived thread.)
    """
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
