"""Bad settings, for the CLI and the UI alike: one line naming the key and where it came from, exit 2, before
any connection and before any simulator starts; never a traceback or an "internal error"."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.loopback import closed_port_url
from tui.cli.main import main

pytestmark = pytest.mark.usefixtures("isolated")


def one_usage_line(capsys, argv: list[str], *words: str) -> str:
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's errors exit, as the command does
        code = exit_.code
    out, err = capsys.readouterr()
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def test_a_port_out_of_range_is_a_usage_error_before_any_connection(capsys):
    """It was `internal error: ExceptionGroup` from metrics."""
    one_usage_line(capsys, ["metrics", "--url", "http://127.0.0.1:99999", "--once"], "bad URL", "port out of range")
    one_usage_line(capsys, ["probe", "--url", "http://127.0.0.1:abc"], "bad URL")
    one_usage_line(capsys, ["bench", "--url", "http://[::1", "--num-prompts", "1"], "bad URL")


def test_a_bad_url_never_repeats_its_credentials(capsys):
    line = one_usage_line(capsys, ["probe", "--url", "http://me:hunter2@127.0.0.1:99999"], "bad URL")
    assert "hunter2" not in line


def test_a_typo_in_the_config_file_names_the_key_and_the_file(capsys, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("timout_s = 5\n")
    one_usage_line(capsys, ["--config", str(config), "probe", "--url", closed_port_url()],
                   f"unknown setting 'timout_s' in {config} (did you mean timeout_s?)")


@pytest.mark.parametrize(("toml", "words"), [
    ("[poll]\nmetrics_interval_s = 0\n", ["poll.metrics_interval_s in"]),
    ("[sim]\ntime_scale = 0\n", ["sim.time_scale in"]),
    ("url = \n", ["is not valid TOML"]),
])
def test_a_bad_value_in_the_default_config_file_names_it(capsys, tmp_path, toml, words):
    config = tmp_path / "xdg" / "phasetop" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(toml)
    one_usage_line(capsys, ["probe", "--url", closed_port_url()], str(config), *words)


def test_a_config_file_that_cannot_be_read_is_one_line(capsys, tmp_path):
    (tmp_path / "xdg" / "phasetop" / "config.toml").mkdir(parents=True)  # root reads any mode-000 file
    one_usage_line(capsys, ["probe", "--url", closed_port_url()], "cannot read config file", "config.toml")


def test_sim_port_out_of_range_is_a_usage_error(capsys):
    """It was `internal error: OverflowError`, exit 70."""
    one_usage_line(capsys, ["sim", "--port", "99999"], "--port", "99999")


def test_a_simulator_setting_that_cannot_run_is_refused_at_load(capsys, monkeypatch):
    monkeypatch.setenv("PHASETOP_SIM__GPU", "Z9000")
    one_usage_line(capsys, ["sim", "--port", "0"], "PHASETOP_SIM__GPU", "unknown device 'Z9000'")


def ui(tmp_path, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PHASETOP_")}
    return subprocess.run(
        [sys.executable, "-m", "tui", *argv],
        env={**clean, "XDG_CONFIG_HOME": str(tmp_path / "xdg"), **env}, cwd=tmp_path,
        capture_output=True, text=True, timeout=60,
    )


def assert_ui_refused(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("phasetop: "), result.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_the_ui_refuses_a_simulator_gpu_it_cannot_start(tmp_path):
    """With nothing answering, the UI would start its simulator: the traceback came from there."""
    assert_ui_refused(ui(tmp_path, {"PHASETOP_SIM__GPU": "Z9000", "PHASETOP_URL": closed_port_url()}),
                      "sim.gpu from PHASETOP_SIM__GPU", "unknown device 'Z9000'")


def test_the_ui_refuses_a_zero_time_scale_naming_the_file(tmp_path):
    config = tmp_path / "xdg" / "phasetop" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f"url = '{closed_port_url()}'\n[sim]\ntime_scale = 0\n")
    assert_ui_refused(ui(tmp_path, {}), "sim.time_scale in", str(config))


def test_the_ui_refuses_an_unreadable_config_file(tmp_path):
    (tmp_path / "xdg" / "phasetop" / "config.toml").mkdir(parents=True)
    assert_ui_refused(ui(tmp_path, {}), "cannot read config file")


def test_the_ui_refuses_a_port_out_of_range(tmp_path):
    assert_ui_refused(ui(tmp_path, {}, "--url", "http://127.0.0.1:99999"), "bad URL")
