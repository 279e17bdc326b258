"""The dcgm-exporter stand-in: dcgm-exporter's exposition (names, labels, units), live values, its command; the
fleet lab's config, its one line when Prometheus is missing, and the lab as a program."""

import subprocess
import sys

import httpx
import pytest

from tui.cli.sim_dcgm import READY_PREFIX
from tui.core.hardware.devices import find_device
from tui.core.telemetry.metric_names import parse_exposition
from tui.sim.dcgm_exporter import DcgmExporter, host_gpus
from tui.fleet_lab import READY_PREFIX as READY_LINE, FleetLab, LabError, prometheus_config

LABELS = {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"}


def test_the_page_is_dcgm_exporters_format_and_follows_set():
    gpus = host_gpus(find_device("H200"), 2, 'node "a"\nb', dram_active=0.4, sm_active=0.5, tensor_active=0.25, fb_used_mib=1000)
    with DcgmExporter(gpus) as exporter:
        page = httpx.get(f"{exporter.url}/metrics").text
        samples = parse_exposition(page)
        exporter.set(dram_active=0.8)
        later = parse_exposition(httpx.get(f"{exporter.url}/metrics").text)
        assert httpx.get(f"{exporter.url}/other").status_code == 404
    assert "# TYPE DCGM_FI_PROF_DRAM_ACTIVE gauge" in page
    dram = samples["DCGM_FI_PROF_DRAM_ACTIVE"]
    assert [v for _, v in dram] == [0.4, 0.4] and [v for _, v in later["DCGM_FI_PROF_DRAM_ACTIVE"]] == [0.8, 0.8]
    first, second = (labels for labels, _ in dram)
    assert set(first) == LABELS
    assert (first["gpu"], first["device"], first["modelName"], first["Hostname"]) == ("0", "nvidia0", "NVIDIA H200", 'node "a"\nb')
    assert second["gpu"] == "1" and first["UUID"] != second["UUID"] and first["UUID"].startswith("GPU-")
    used, free = samples["DCGM_FI_DEV_FB_USED"][0][1], samples["DCGM_FI_DEV_FB_FREE"][0][1]
    assert used == 1000 and used + free == pytest.approx(141e9 / 2**20)
    assert samples["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"][0][1] == 0.25 and samples["DCGM_FI_DEV_GPU_UTIL"][0][1] == 50


def test_sim_dcgm_command_serves_until_stopped():
    command = [sys.executable, "-m", "tui", "sim-dcgm", "--port", "0", "--gpu", "A100", "--count", "3", "--hostname", "gpu-7",
               "--dram-active", "0.3"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith(READY_PREFIX), process.stderr.read()
        samples = parse_exposition(httpx.get(f"{line.removeprefix(READY_PREFIX).strip()}/metrics").text)
    finally:
        process.terminate()
        process.wait(10)
    dram = samples["DCGM_FI_PROF_DRAM_ACTIVE"]
    assert [(labels["Hostname"], labels["modelName"], v) for labels, v in dram] == [("gpu-7", "NVIDIA A100 80GB SXM", 0.3)] * 3


def test_sim_dcgm_refuses_a_fraction_above_one():
    done = subprocess.run([sys.executable, "-m", "tui", "sim-dcgm", "--dram-active", "1.5"], capture_output=True, text=True)
    assert done.returncode == 2 and "1.5 is not a fraction from 0 to 1" in done.stderr


def test_the_lab_without_prometheus_is_one_line():
    with pytest.raises(LabError, match=r"^'no-such-prometheus' is not on PATH: install Debian's prometheus package"):
        FleetLab.start(servers=(), gpus=(), binary="no-such-prometheus")


def test_the_generated_config_labels_each_role():
    config = prometheus_config([("127.0.0.2:8000", "prefill"), ("127.0.0.4:8000", None)], ["127.0.0.1:9400"], 1.0)
    assert "scrape_interval: 1s" in config
    assert "      - targets: ['127.0.0.2:8000']\n        labels: {role: 'prefill'}\n      - targets: ['127.0.0.4:8000']\n" in config
    assert "job_name: dcgm" in config and "'127.0.0.1:9400'" in config


def test_the_lab_as_a_program_prints_its_url_and_stops_whole_on_sigterm():
    process = subprocess.Popen([sys.executable, "-m", "tui.fleet_lab"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith(READY_LINE), process.stderr.read()
        url = line.removeprefix(READY_LINE).strip()
        assert httpx.get(f"{url}/-/ready").status_code == 200
    finally:
        process.terminate()
        returncode = process.wait(30)
    assert returncode == 0
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/-/ready")
