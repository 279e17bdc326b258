"""`make demo-fleet`'s start-up (scripts/demo_fleet.sh) with a stand-in for the UI, and for the lab where its timing is the point.

The script once polled a file its background lab had not been given yet (`sed: can't read …/out`, make Error 2,
fine when run again): it now reads the lab's ready line from a FIFO. The stand-ins are shell scripts in a BIN
directory of their own, as `make` passes BIN; the UI's records its arguments and what it could reach.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "demo_fleet.sh"
REPO = SCRIPT.parents[1]

# The UI's stand-in: its arguments, whether it was handed the script's FIFO, and the lab's `up` series.
UI = f"""#!/bin/sh
echo "$@" >"$OUT/ui-args"
ls -l /proc/$$/fd | grep -c ready >"$OUT/ui-fifo" || true
if [ -n "${{QUERY_UP:-}}" ]; then
    {sys.executable} -c 'import httpx, sys; print(len(httpx.get(sys.argv[1] + "/api/v1/query", params={{"query": "up"}}).json()["data"]["result"]))' "$2" >"$OUT/ui-up"
fi
"""


def _bin(tmp_path: Path, lab: str) -> Path:
    """A BIN directory: `python` is `lab` (a shell script body), `phasetop` the UI's stand-in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("python", lab), ("phasetop", UI)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(stat.S_IRWXU)
    return bin_dir


def _run(tmp_path: Path, bin_dir: Path, timeout_s: float = 60, **env: str) -> subprocess.CompletedProcess:
    (tmp_path / "tmp").mkdir()
    return subprocess.run(["sh", str(SCRIPT)], cwd=REPO, capture_output=True, text=True, timeout=timeout_s,
                          env={**os.environ, "BIN": str(bin_dir), "OUT": str(tmp_path), "TMPDIR": str(tmp_path / "tmp"), **env})


def test_the_ui_gets_the_url_of_a_lab_slow_to_say_it_and_the_lab_stops_with_the_ui(tmp_path):
    # Notes first, the ready line a while later, as the real lab's comes after its start-up.
    lab = """#!/bin/sh
trap 'echo stopped >"$OUT/lab-stopped"; exit 0' TERM
echo "a note on stdout first"
sleep 0.5
echo "fleet lab: Prometheus at http://127.0.0.1:9"
while :; do sleep 0.1; done
"""
    result = _run(tmp_path, _bin(tmp_path, lab))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "ui-args").read_text().split() == ["--prometheus", "http://127.0.0.1:9", "--role-label", "role", "--no-save"]
    assert (tmp_path / "ui-fifo").read_text().strip() == "0", "the UI inherited the script's FIFO"
    assert (tmp_path / "lab-stopped").exists(), "the lab was not stopped when the UI exited"
    assert list((tmp_path / "tmp").iterdir()) == [], "the script's temp dir is left"


def test_a_lab_that_fails_to_start_is_one_clear_error_with_its_last_lines(tmp_path):
    lab = """#!/bin/sh
echo "fleet lab: 'prometheus' is not on PATH: install Debian's prometheus package" >&2
exit 1
"""
    result = _run(tmp_path, _bin(tmp_path, lab))
    assert result.returncode == 1
    assert "the fleet lab did not start (exit status 1)" in result.stderr
    assert "'prometheus' is not on PATH" in result.stderr
    assert "sed" not in result.stderr and not (tmp_path / "ui-args").exists()
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_missing_python_is_a_clear_error_not_a_hang(tmp_path):
    bin_dir = _bin(tmp_path, "")
    (bin_dir / "python").unlink()
    result = _run(tmp_path, bin_dir, timeout_s=10)
    assert result.returncode == 1
    assert "the fleet lab did not start (exit status 127)" in result.stderr and "not found" in result.stderr


def test_the_real_lab_starts_for_the_ui_several_times_over_and_stops_whole(tmp_path):
    """The real lab (Prometheus, simulators, DCGM stand-ins), started by the script twice in a row: the UI finds
    Prometheus scraping all five targets each time, and nothing the lab started is left after."""
    lab = f"""#!/bin/sh
exec {sys.executable} "$@"
"""
    bin_dir = _bin(tmp_path, lab)
    for attempt in range(2):
        run_dir = tmp_path / str(attempt)
        run_dir.mkdir()
        started = time.monotonic()
        result = _run(run_dir, bin_dir, timeout_s=120, QUERY_UP="1")
        assert result.returncode == 0, f"attempt {attempt}: {result.stderr}"
        assert (run_dir / "ui-up").read_text().strip() == "5", f"attempt {attempt}: not every target scraped"
        assert time.monotonic() - started < 90
        assert list((run_dir / "tmp").iterdir()) == []
    left = [p.info["cmdline"] for p in psutil.process_iter(["cmdline", "environ"])
            if (p.info["environ"] or {}).get("TMPDIR", "").startswith(str(tmp_path))]  # what these runs started
    assert left == [], f"left running: {left}"
