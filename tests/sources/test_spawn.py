"""The drawing thread keeps out of its meters' way, and the children it starts do not inherit that: run apart, in a
process of its own, so this test process keeps its own priority."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, os, subprocess, sys, threading
from tui.spawn import keep_drawing_apart, keep_priority, meter_cores, popen
keep_priority()
lowered = keep_drawing_apart(10)
child = popen([sys.executable, "-c", "import os, json; print(json.dumps([os.nice(0), sorted(os.sched_getaffinity(0))]))"],
              stdout=subprocess.PIPE, text=True)
started = json.loads(child.communicate()[0])
drawing = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
print(json.dumps({"lowered": lowered, "drawing_nice": drawing, "drawing_cores": sorted(os.sched_getaffinity(0)),
                  "child": started, "meter_cores": sorted(meter_cores() or [])}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="nice and cores are set per thread on Linux only")
def test_the_drawing_thread_is_lowered_and_alone_and_its_children_start_as_the_process_began():
    before_nice, before_cores = os.nice(0), sorted(os.sched_getaffinity(0))
    out = json.loads(subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout)
    assert out["lowered"] and out["drawing_nice"] == max(10, before_nice)
    assert out["child"] == [before_nice, before_cores], "a child starts at the process's first priority, on every core"
    if len(before_cores) > 1:
        assert out["drawing_cores"] == [before_cores[-1]]
        assert out["meter_cores"] == before_cores[:-1], "meters read on every core but the drawing's"
    else:
        assert out["meter_cores"] == []
