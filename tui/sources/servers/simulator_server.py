"""Start the simulator as a child process on a free loopback port, notice when it dies, start it again, stop it.

    with SimulatorProcess.start(["--gpu", "H200"]) as sim:
        ...  # talk to sim.url

The child is `python -m tui sim --port 0 …`; it prints one ready line with its URL on stdout. Its
stdin is a pipe from us, so if this process dies without stopping it, the child sees EOF and exits.
A child that dies on its own (killed from outside) closes its stdout: the thread reading it reaps the
child at once (no zombie) and tells whoever asked (`on_exit`).
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from tui.core.serving.exit_status import exit_status, last_line
from tui.sim.options import READY_PREFIX, WORKER_PREFIX
from tui.spawn import popen

if TYPE_CHECKING:
    from tui.config import Settings

START_TIMEOUT_S = 30.0


def simulator_args(settings: Settings) -> list[str]:
    """The flags that make a simulator the one `settings` configure: its device, model and time scale."""
    return ["--gpu", settings.sim.gpu, "--model", settings.sim.model, "--time-scale", str(settings.sim.time_scale)]


class SimulatorError(RuntimeError):
    """The simulator did not start; the message holds its last stderr line."""


class SimulatorProcess:
    """A running child simulator: `.url`, `.stop()`, `.restart()`, `on_exit`, and a context manager."""

    def __init__(self, command: list[str], env: Mapping[str, str]) -> None:
        self._command = command
        self._env = env
        self.process: subprocess.Popen | None = None
        self.url = ""
        self.workers: dict[str, str] = {}
        """A disaggregated simulator's workers ("prefill-0", "decode-0", …) → URL; empty for one server."""
        self._stderr = None
        self._last_stdout = ""
        self._stopping = False
        self.on_exit: Callable[[str], None] | None = None
        """Called (from the reading thread) with `exit_line()` when the child exits without being stopped."""

    @classmethod
    def start(
        cls,
        args: Sequence[str] = (),
        host: str = "127.0.0.1",
        timeout_s: float = START_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
    ) -> "SimulatorProcess":
        """Launch `phasetop sim` with extra flags on a free port of `host`; return once it accepts connections.

        `env` adds variables for the child (e.g. VLLM_API_KEY, which keeps a key off the command line).
        """
        command = _command(host, args)
        simulator = cls(command, {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
        simulator._launch(command, timeout_s)
        return simulator

    def restart(self, timeout_s: float = START_TIMEOUT_S, args: Sequence[str] | None = None) -> None:
        """Start the child again on the same port (so the URL the UI holds stays right), with the same flags or
        `args` in their place.

        Raises SimulatorError when it does not start (the port taken meanwhile, a flag it refuses)."""
        self.stop()
        port = urlsplit(self.url).port
        if args is not None:
            self._command = _command(urlsplit(self.url).hostname or "127.0.0.1", args)
        self._stopping = False
        self._launch([*self._command, "--port", str(port)] if port else self._command, timeout_s)

    def _launch(self, command: list[str], timeout_s: float) -> None:
        stderr_file = tempfile.TemporaryFile(mode="w+b")
        process = popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_file, env=self._env)
        self.process, self._stderr, self._last_stdout, self.workers = process, stderr_file, "", {}
        lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, args=(process, lines), daemon=True, name="sim-stdout").start()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = lines.get(timeout=max(0.0, min(0.1, deadline - time.monotonic())))
            except queue.Empty:
                line = None
            if line is not None and line.startswith(WORKER_PREFIX.encode()):
                name, _, url = line[len(WORKER_PREFIX):].decode().strip().partition(" listening on ")
                self.workers[name] = url
            if line is not None and line.startswith(READY_PREFIX.encode()):
                self.url = line[len(READY_PREFIX):].decode().strip()
                return
            if process.poll() is not None or time.monotonic() > deadline or line == b"":
                reason = last_line(self.log_text()) or ("timed out" if process.poll() is None else exit_status(process.returncode))
                self._stopping = True  # the reading thread reports nothing: this failure is raised here
                _kill(process)
                stderr_file.close()
                raise SimulatorError(f"the simulator did not start: {reason}")

    def stop(self, timeout_s: float = 5.0) -> None:
        """Ask the child to stop (SIGTERM), and kill it if it has not within the timeout."""
        self._stopping = True
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                _kill(process)
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()
        if self._stderr is not None:
            self._stderr.close()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def log_text(self) -> str:
        """What the child has written on stderr so far: its notes (a disaggregated one's KV transfers among them)."""
        try:  # stop() may close the file from another thread at any moment: then there is nothing more to read
            fd = self._stderr.fileno()  # pread: the child shares this file's offset, and a seek would move its writes
            return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")
        except (AttributeError, OSError, ValueError):
            return ""

    def exit_line(self) -> str:
        """How the child ended and the last line it wrote: "killed by SIGKILL; last said: …"."""
        process = self.process
        status = exit_status(process.returncode) if process is not None and process.returncode is not None else "still running"
        last = last_line(self.log_text()) or self._last_stdout
        return f"{status}; last said: {last}" if last else status

    def _pump(self, process: subprocess.Popen, lines: queue.Queue) -> None:
        """Hand stdout lines to the starter and keep draining (the child never blocks on a full pipe); at EOF
        the child is gone or going: reap it, and report it if it had started and nobody stopped it (one that never
        said it was ready is the starter's failure to raise, not an exit)."""
        ready = False
        try:
            for line in iter(process.stdout.readline, b""):
                ready = ready or line.startswith(READY_PREFIX.encode())
                lines.put(line)
                if line.strip():
                    self._last_stdout = line.decode(errors="replace").strip()
        except (OSError, ValueError):  # stop() closed the pipe under us: it is stopping the child itself
            pass
        lines.put(b"")
        process.wait()
        if ready and process is self.process and not self._stopping and self.on_exit is not None:
            self.on_exit(self.exit_line())

    def __enter__(self) -> "SimulatorProcess":
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


def _command(host: str, args: Sequence[str]) -> list[str]:
    """`phasetop sim` on a free port of `host` with `args`, stopping when our end of its stdin closes."""
    return [sys.executable, "-m", "tui", "sim", "--host", host, "--port", "0", "--stop-on-stdin-close", *args]


def _kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()

