"""The UI's drawing kept out of its meters' way: a lower priority and a core of its own; children spawned apart.

A repaint must not sit between a chunk's arrival and its stamp. The drawing thread runs at a lower priority
(nice) and, where the process may use two cores or more, on one core alone (`keep_drawing_apart`); its meter
processes read on the other cores (`meter_cores`). Sharing a core, even at nice 10, the drawing still held the
meter back now and then: 32 streams' ITL p99 read 11–14 % over the server's writes on this 2-core machine, against
0.1 % with the meter on the other core (bench/ui_fidelity.py).

A process takes the nice value and the cores of the thread that starts it, and nothing may raise a priority once
lowered, so every child is started on one thread kept as the process began (`keep_priority` makes it, before the
drawing thread changes its own); `popen` is `subprocess.Popen` there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_starter: ThreadPoolExecutor | None = None
_starter_thread: threading.Thread | None = None
_drawing_core: int | None = None
"""The core the drawing thread keeps to itself, once `keep_drawing_apart` gave it one."""


def keep_priority() -> None:
    """Make the thread that starts children, at the calling thread's priority (before that is lowered)."""
    global _starter, _starter_thread
    if _starter is None:
        _starter = ThreadPoolExecutor(1, thread_name_prefix="phasetop-starter")
        _starter_thread = _starter.submit(threading.current_thread).result()  # it exists now, at today's priority


def popen(*args: Any, **kwargs: Any) -> subprocess.Popen[Any]:
    """`subprocess.Popen(*args, **kwargs)`, on the starting thread when there is one."""
    if _starter is None or threading.current_thread() is _starter_thread:
        return subprocess.Popen(*args, **kwargs)
    return _starter.submit(subprocess.Popen, *args, **kwargs).result()


def keep_drawing_apart(nice: int) -> bool:
    """The calling (drawing) thread at nice `nice` (or its own, if lower already) and, where this process may use two
    cores or more, on the last of them alone. Linux sets both per thread; False elsewhere, where they would hold for the whole process, children
    and all."""
    global _drawing_core
    if not sys.platform.startswith("linux"):
        return False
    try:
        thread = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, thread, max(nice, os.getpriority(os.PRIO_PROCESS, thread)))  # never raised
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) > 1:
            os.sched_setaffinity(0, {cores[-1]})  # 0: the calling thread
            _drawing_core = cores[-1]
    except OSError:
        return False
    return True


def meter_cores() -> set[int] | None:
    """The cores a meter process reads on: all this process may use but the drawing's; None when it has none apart."""
    if _drawing_core is None:
        return None
    starter = _starter_thread.native_id if _starter_thread else None
    return (os.sched_getaffinity(starter) if starter is not None else set()) - {_drawing_core} or None
