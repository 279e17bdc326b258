"""`phasetop` with no subcommand: a bad setting is one line and exit 2 before any screen opens."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize(("env", "field"), [
    ({"PHASETOP_BANDWIDTH_GBS": "-1"}, "bandwidth_gbs"),
    ({"PHASETOP_TIMEOUT_S": "soon"}, "timeout_s"),
])
def test_a_bad_setting_for_the_ui_is_one_line_not_a_traceback(tmp_path, env, field):
    result = subprocess.run(
        [sys.executable, "-m", "tui", "--url", "http://127.0.0.1:9"],
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path), **env}, cwd=tmp_path,
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("phasetop: bad settings:") and field in lines[0]


def test_version_names_the_python_and_where_this_copy_runs_from(tmp_path):
    import tui

    result = subprocess.run([sys.executable, "-m", "tui", "--version"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=60, env={**os.environ, "COLUMNS": "40",  # argparse wrapped to the terminal
                                             "PYTHONPATH": os.path.dirname(os.path.dirname(tui.__file__))})
    assert result.returncode == 0
    assert result.stdout.splitlines() == [f"phasetop {tui.__version__} (Python {sys.version.split()[0]})",
                                          f"from {os.path.dirname(tui.__file__)}"]
