"""`phasetop --window S`: the UI's metrics window, from the flag into Settings, checked like the rest."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tui.cli.common import settings_from
from tui.cli.main import parse_args


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no .env from the checkout
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    for name in list(os.environ):
        if name.startswith("PHASETOP_"):
            monkeypatch.delenv(name)
    return tmp_path


def ui_settings(argv):
    args = parse_args(argv)
    return settings_from(args, bandwidth_gbs=args.bandwidth_gbs, **{"poll.metrics_window_s": args.metrics_window_s})


def test_the_window_defaults_to_thirty_seconds(workdir):
    assert parse_args([]).metrics_window_s is None
    assert ui_settings([]).poll.metrics_window_s == 30.0


def test_the_flag_beats_the_config_file(workdir):
    (workdir / "c.toml").write_text("[poll]\nmetrics_window_s = 60\n")
    assert ui_settings(["--config", str(workdir / "c.toml")]).poll.metrics_window_s == 60.0
    assert ui_settings(["--config", str(workdir / "c.toml"), "--window", "12"]).poll.metrics_window_s == 12.0


def test_a_window_out_of_range_is_one_line_and_exit_2(workdir):
    result = subprocess.run(
        [sys.executable, "-m", "tui", "--url", "http://127.0.0.1:9", "--window", "0"],
        env={**os.environ, "XDG_CONFIG_HOME": str(workdir)}, cwd=workdir,
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("phasetop: bad settings: --window"), lines
