"""The GPU check's copy load from the parent's side: start `tui.sources.workloads.copy_child` on one GPU, read its own count.

    with CopyLoad(uuid, seconds=6.0, buffer_mib=1024) as load:   # returns once the child is warm and copying
        ...sample NVML...
        run = load.result()                                       # CopyRun: bytes moved over its time

Failures (torch missing in the child, no CUDA, out of memory, a child that dies) raise LoadFailed, one line.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import tui
from tui.core.hardware.gpu_check import CopyRun
from tui.core.untrusted import one_line

READY_TIMEOUT_S = 120.0
"""Longest wait for the child to be warm: importing torch and making a CUDA context take seconds on a cold host."""
RESULT_SLACK_S = 30.0
"""How long past its copying time the child may take to report."""
CHILD = [sys.executable, "-m", "tui.sources.workloads.copy_child"]


class LoadFailed(Exception):
    """The load did not run; the message is one line for a person."""


def torch_installed() -> bool:
    """Whether this Python can import torch (looked up, not imported: the copy runs in a child)."""
    return importlib.util.find_spec("torch") is not None


class CopyLoad:
    """One copy child on the GPU `device_uuid` names (CUDA_VISIBLE_DEVICES takes GPU and MIG UUIDs alike)."""

    def __init__(self, device_uuid: str | None, seconds: float, buffer_mib: int,
                 command: list[str] | None = None) -> None:
        self.device_uuid = device_uuid
        self.seconds = seconds
        """How long the child copies once warm: at least the sampling window, so every window lies inside it."""
        self.buffer_mib = buffer_mib
        self.command = command or CHILD
        """The child program (a stand-in in tests); SECONDS and MIB are appended."""
        self._process: subprocess.Popen | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self._ready: dict = {}

    def __enter__(self) -> CopyLoad:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the child and return once it is warm and copying; LoadFailed if it never gets there."""
        env = dict(os.environ)
        if self.device_uuid:
            env["CUDA_VISIBLE_DEVICES"] = self.device_uuid
        root = str(Path(tui.__file__).resolve().parent.parent)  # so `-m` finds phasetop where it is not installed
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        try:
            self._process = subprocess.Popen([*self.command, str(self.seconds), str(self.buffer_mib)], env=env,
                                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr,
                                             text=True)
        except OSError as error:
            raise LoadFailed(f"the copy could not start: {error}") from None
        threading.Thread(target=self._read, daemon=True, name="copy-load-stdout").start()
        self._ready = self._next("ready", READY_TIMEOUT_S)

    def result(self) -> CopyRun:
        """The child's own count once it has finished copying."""
        done = self._next("bytes_moved", self.seconds + RESULT_SLACK_S)
        try:
            bytes_moved, seconds = int(done["bytes_moved"]), float(done["seconds"])
        except (KeyError, TypeError, ValueError):
            raise LoadFailed(f"the copy reported nonsense: {one_line(json.dumps(done), 160)}") from None
        if bytes_moved <= 0 or seconds <= 0:
            raise LoadFailed(f"the copy moved {bytes_moved} bytes in {seconds} s")
        return CopyRun(self.buffer_mib, bytes_moved, seconds, one_line(str(self._ready.get("device", "?")), 80),
                       one_line(str(self._ready["torch"]), 40) if self._ready.get("torch") else None)

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
        if self._process is not None:
            self._process.wait()
        self._stderr.close()

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _next(self, key: str, timeout_s: float) -> dict:
        """The child's next JSON line holding `key`; its error line, its death or its silence raise LoadFailed."""
        while True:
            try:
                line = self._lines.get(timeout=timeout_s)
            except queue.Empty:
                raise LoadFailed(f"the copy said nothing for {timeout_s:.0f} s") from None
            if line is None:
                status = self._process.wait()
                raise LoadFailed(f"the copy ended (exit {status}) before reporting: {self._stderr_tail()}")
            try:
                document = json.loads(line)
            except ValueError:
                continue  # a library's own print on stdout
            if isinstance(document, dict) and "error" in document:
                raise LoadFailed(f"the copy failed: {one_line(str(document['error']), 200)}")
            if isinstance(document, dict) and key in document:
                return document

    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        lines = [line for line in self._stderr.read().splitlines() if line.strip()]
        return one_line(lines[-1], 200) if lines else "nothing on stderr"
