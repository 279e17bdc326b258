"""The parent's end of one meter process: it starts the process on first use, writes commands to it, and hands
each event it reports to the job (a stream, a warm-up) it belongs to, from a thread that only reads the pipe.

When the process dies (killed, or a bug of its own), every job in flight hears why (`MeterEnded`), so each
stream ends as a failed request that keeps what was read of it, and the next command starts a new process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from tui.core.serving.exit_status import exit_status, last_line
from tui.meter.protocol import Cancel, Failed, Finished, Frame, Frames, Hello, OpenServer, WarmedUp, encode
from tui.sources import wall_clock
from tui.sources.http import StreamTarget
from tui.spawn import meter_cores, popen

READ_BYTES = 1 << 16


@dataclass(frozen=True, slots=True)
class MeterEnded:
    """The meter could not finish the job (its process died with it in flight, or it hit a bug of the meter's own);
    `reason` says how, in one line."""

    reason: str


class Sink(Protocol):
    """Where one job's events go; called on the link's reading thread."""

    def put(self, event: object) -> None: ...


class LoopSink:
    """A job's events into a queue of the event loop that waits for them."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[object] = asyncio.Queue()

    def put(self, event: object) -> None:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, event)
        except RuntimeError:  # its loop has closed: nobody waits for it any more
            pass


class MeterLink:
    """One meter process, started when first needed (and again after it died)."""

    def __init__(self, frame_s: float, on_ended: Callable[[str], None] | None = None) -> None:
        self._frame_s = frame_s
        self._on_ended = on_ended
        """Told (on the reading thread) when the process died without being closed."""
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._opened: set[int] = set()
        """Servers the running process was told of."""
        self._jobs: dict[int, tuple[subprocess.Popen, Sink]] = {}
        """Jobs in flight: the process running each, and where its events go."""
        self._closed = False
        self.cpu_pct: float | None = None
        """The meter's CPU, percent of one core, as its last frame said."""
        self.cpu_read_at = 0.0
        """When (monotonic) that frame came."""

    @property
    def in_flight(self) -> int:
        """Jobs waiting for their end."""
        return len(self._jobs)

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def start(self) -> None:
        """Start the process now, if it is not running (the first command would)."""
        with self._lock:
            if not self._closed:
                self._running()

    def submit(self, job: int, command: object, sink: Sink, server: int, target: StreamTarget) -> None:
        """Send `command` (a job of `server`, whose target the process is told first if it was not); its events go to
        `sink`. A process that cannot be started or written to ends the job at once, saying why."""
        with self._lock:
            try:
                if self._closed:
                    raise OSError("the meter was closed")
                process = self._running()
                self._jobs[job] = (process, sink)
                if server not in self._opened:
                    _send(process, OpenServer(server, target))
                    self._opened.add(server)
                _send(process, command)
            except OSError as error:
                self._jobs.pop(job, None)
                sink.put(MeterEnded(f"the meter process could not be reached: {error.strerror or error}"))

    def cancel(self, job: int) -> None:
        """The job's reader went away: stop it there, and forget it."""
        with self._lock:
            held = self._jobs.pop(job, None)
            if held is not None and held[0].poll() is None:
                try:
                    _send(process=held[0], command=Cancel(job))
                except OSError:
                    pass

    def close(self) -> None:
        """Stop the process (its streams go with it, each told so) and start no other."""
        with self._lock:
            self._closed = True
            process, self._process = self._process, None
            jobs, self._jobs = self._jobs, {}
        for _process, sink in jobs.values():
            sink.put(MeterEnded("the meter was closed"))
        if process is not None:
            _stop(process)

    def _running(self) -> subprocess.Popen:
        """The live process, started if there is none (the lock held)."""
        if self._process is not None and self._process.poll() is None:
            return self._process
        stderr = tempfile.TemporaryFile()
        process = popen([sys.executable, "-m", "tui.meter"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
        if (cores := meter_cores()) is not None:  # off the drawing thread's core
            with contextlib.suppress(OSError):
                os.sched_setaffinity(process.pid, cores)
        self._process, self._opened = process, set()
        _send(process, Hello(wall_clock.offset_s(), self._frame_s))
        threading.Thread(target=self._read, args=(process, stderr), daemon=True, name=f"meter-{process.pid}").start()
        return process

    def _read(self, process: subprocess.Popen, stderr) -> None:
        """Until the process's stdout ends: each event to its job's sink; then its end to the jobs it had."""
        frames = Frames()
        fd = process.stdout.fileno()
        while True:
            try:
                data = os.read(fd, READ_BYTES)
            except OSError:
                data = b""
            if not data:
                break
            for event in frames.feed(data):
                self._deliver(event)
        process.wait()
        with stderr:
            said = last_line(_written(stderr))
        self._ended(process, f"the meter process died ({exit_status(process.returncode)}" + (f"; last said: {said})" if said else ")"))

    def _deliver(self, event: object) -> None:
        if isinstance(event, Frame):
            if event.cpu_pct is not None:
                self.cpu_pct, self.cpu_read_at = event.cpu_pct, time.monotonic()
            for lane in event.lanes:
                held = self._jobs.get(lane.job)
                if held is not None:
                    held[1].put(lane)
        elif isinstance(event, Finished | WarmedUp | Failed):
            with self._lock:
                held = self._jobs.pop(event.job, None)
            if held is not None:
                held[1].put(MeterEnded(event.reason) if isinstance(event, Failed) else event)

    def _ended(self, process: subprocess.Popen, reason: str) -> None:
        """The process is gone: every job it had hears why (unless it was closed on purpose), and so does the owner."""
        with self._lock:
            if self._closed:
                return
            lost = [job for job, (owner, _sink) in self._jobs.items() if owner is process]
            sinks = [self._jobs.pop(job)[1] for job in lost]
            if process is self._process:
                self._process = None
        for sink in sinks:
            sink.put(MeterEnded(reason))
        if self._on_ended is not None:
            self._on_ended(reason)


def _send(process: subprocess.Popen, command: object) -> None:
    """One command down the process's stdin, whole (the lock held)."""
    process.stdin.write(encode(command))
    process.stdin.flush()


def _written(stderr_file) -> str:
    """What the process wrote on stderr (pread: the child shares the file's offset)."""
    fd = stderr_file.fileno()
    return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")


def _stop(process: subprocess.Popen, timeout_s: float = 2.0) -> None:
    """SIGTERM, then SIGKILL if it has not gone within the timeout."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass
