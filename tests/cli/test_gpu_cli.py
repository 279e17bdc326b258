"""`phasetop gpu`: the real no-driver path of this machine, and a fake NVML with GPM."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.fixtures.fake_pynvml import FakeGpu, FakeNvml
from tui.cli.main import main


def test_no_driver_here_prints_no_devices_and_the_reason_exit_0():
    result = subprocess.run([sys.executable, "-m", "tui", "gpu", "--json", "--interval", "0.1"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["devices"] == []
    assert "no NVIDIA driver here" in doc["reason"]
    assert doc["host"]["ram_total_bytes"] > 0 and doc["host"]["cpu_count"] >= 1
    assert len(doc["samples"]) == 1


def test_gpm_figures_per_device_over_several_samples(monkeypatch, capsys):
    FakeNvml([FakeGpu(dram_pct=[10.0, 40.0, 70.0, 90.0])]).install(monkeypatch)
    assert main(["gpu", "--json", "--interval", "0.1", "--count", "3", "--url", "http://10.0.0.1:8000"]) == 0
    doc = json.loads(capsys.readouterr().out)
    utils = [s["devices"][0]["mem_bw_util"] for s in doc["samples"]]
    assert utils == pytest.approx([0.4, 0.7, 0.9])  # the first window is the baseline, never shown
    device = doc["devices"][0]
    assert device["name"] == "NVIDIA H200"
    assert device["mem_bw_source"] == "gpm"
    assert device["peak_bw_gbs"] == 4800
    assert device["mem_bw_gbs"] == pytest.approx(0.9 * 4800)
    assert device["sm_util"] == pytest.approx(0.88)
    assert device["mem_used_bytes"] == 100 * 2**30 and device["mem_total_bytes"] == 141 * 2**30
    assert doc["host"]["process_reason"] == "no local server port given"


def test_human_mode_says_busy_time_is_not_bandwidth(monkeypatch, capsys):
    FakeNvml([FakeGpu(name="NVIDIA L40S", max_mem_clock_mhz=9001, bus_width_bits=384, gpm=False)]).install(monkeypatch)
    assert main(["gpu", "--interval", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "GPU 0 NVIDIA L40S: mem busy 61% of the time (no GPM: not bandwidth)" in out
    assert "GB/s" not in out.splitlines()[0]
    assert out.splitlines()[-1].startswith("host: CPU")


@pytest.mark.parametrize("argv", [["--interval", "0.05"], ["--count", "0"]])
def test_bad_values_are_usage_errors(argv, capsys):
    assert main(["gpu", *argv]) == 2
    assert "must be" in capsys.readouterr().err
