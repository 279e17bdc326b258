"""Start the simulator as a child process on a free loopback port, and stop it.

    with SimulatorProcess.start(["--gpu", "H200"]) as sim:
        ...  # talk to sim.url

The child is `python -m tui sim --port 0 …`; it prints one ready line with its URL on stdout. Its
stdin is a pipe from us, so if this process dies without stopping it, the child sees EOF and exits.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence

from tui.sim.options import READY_PREFIX

START_TIMEOUT_S = 30.0


class SimulatorError(RuntimeError):
    """The simulator did not start; the message holds its last stderr line."""


class SimulatorProcess:
    """A running child simulator: `.url`, `.stop()`, and a context manager."""

    def __init__(self, process: subprocess.Popen, url: str, stderr_file) -> None:
        self.process = process
        self.url = url
        self._stderr = stderr_file

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
        command = [sys.executable, "-m", "tui", "sim", "--host", host, "--port", "0", "--stop-on-stdin-close", *args]
        stderr_file = tempfile.TemporaryFile(mode="w+b")
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_file, env=env)
        lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True, name="sim-stdout").start()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = lines.get(timeout=max(0.0, min(0.1, deadline - time.monotonic())))
            except queue.Empty:
                line = None
            if line is not None and line.startswith(READY_PREFIX.encode()):
                return cls(process, line[len(READY_PREFIX):].decode().strip(), stderr_file)
            if process.poll() is not None or time.monotonic() > deadline or line == b"":
                reason = _last_line(stderr_file) or ("timed out" if process.poll() is None else f"exit status {process.returncode}")
                _kill(process)
                stderr_file.close()
                raise SimulatorError(f"the simulator did not start: {reason}")

    def stop(self, timeout_s: float = 5.0) -> None:
        """Ask the child to stop (SIGTERM), and kill it if it has not within the timeout."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                _kill(self.process)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()
        self._stderr.close()

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def __enter__(self) -> "SimulatorProcess":
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


def _pump(stream, lines: queue.Queue) -> None:
    """Hand stdout lines to the starter; keep draining afterwards so the child never blocks on a full pipe."""
    for line in iter(stream.readline, b""):
        lines.put(line)
    lines.put(b"")


def _kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()


def _last_line(stderr_file) -> str:
    stderr_file.seek(0)
    text = stderr_file.read().decode(errors="replace").strip()
    return text.splitlines()[-1] if text else ""
