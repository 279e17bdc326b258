"""The nice values of a vLLM-like process tree's engine threads."""

from __future__ import annotations

import os

import psutil

from tests.processes import command_line


def engine_threads(pid: int) -> list[int]:
    """The nice value of each thread of the engine processes under `pid`."""
    engines = [p for p in psutil.Process(pid).children(recursive=True) if "EngineCore" in " ".join(command_line(p))]
    return [os.getpriority(os.PRIO_PROCESS, t.id) for p in engines for t in p.threads()]
