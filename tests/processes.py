"""Child processes read while they may be exiting under the test."""

from __future__ import annotations

import psutil


def command_line(process: psutil.Process) -> list[str]:
    """The process's command line, or nothing once it has exited (a zombie has none to read)."""
    try:
        return process.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return []


def children(pid: int) -> list[psutil.Process]:
    """Every process under `pid`, or none once it has gone."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
