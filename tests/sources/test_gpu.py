"""The NVML sampler against the real pynvml module with its functions faked, and against no driver at all."""

from __future__ import annotations

import subprocess
import sys

import pynvml
import pytest

from tests.fixtures.fake_pynvml import FakeGpu, FakeNvml
from tui.sources.gpu import GpuSampler

GIB = 2**30


def test_no_driver_here_is_a_normal_state_with_a_reason():
    """This machine has no NVIDIA driver: the real pynvml raises LibraryNotFound."""
    with GpuSampler() as sampler:
        sample = sampler.sample()
    assert sample.devices == ()
    assert sample.reason.startswith("no NVIDIA driver here")
    assert "NVML Shared Library Not Found" in sample.reason


def test_init_errors_become_reasons(monkeypatch):
    FakeNvml([FakeGpu()], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED).install(monkeypatch)
    with GpuSampler() as sampler:
        assert sampler.sample().devices == ()
        assert sampler.reason.startswith("the NVIDIA driver is not loaded")


def test_gpm_bandwidth_in_gbs_against_the_h200_preset(monkeypatch):
    fake = FakeNvml([FakeGpu(dram_pct=[50.0, 25.0], sm_pct=88.0)]).install(monkeypatch)
    with GpuSampler() as sampler:
        first = sampler.sample().devices[0]
        second = sampler.sample().devices[0]
    assert first.mem_bw_source == "gpm"
    assert first.peak_bw_gbs == 4800 and first.peak_bw_source == "preset"  # 3201 MHz × 6144 bit computes 4917
    assert first.mem_bw_util == 0.5 and first.mem_bw_gbs == pytest.approx(2400)
    assert second.mem_bw_util == 0.25 and second.mem_bw_gbs == pytest.approx(1200)
    assert first.sm_util == pytest.approx(0.88) and first.sm_util_source == "gpm"
    assert first.mem_used_bytes == 100 * GIB and first.mem_total_bytes == 141 * GIB
    assert first.mem_clock_mhz == 3201
    assert first.reason is None
    assert fake.freed == 2 and fake.shutdown_calls == 1


def test_without_gpm_memory_busy_time_is_never_bandwidth(monkeypatch):
    FakeNvml([FakeGpu(name="NVIDIA A100-SXM4-80GB", max_mem_clock_mhz=1593, bus_width_bits=5120,
                      gpm=False, util_memory=61, util_gpu=97)]).install(monkeypatch)
    with GpuSampler() as sampler:
        reading = sampler.sample().devices[0]
    assert reading.mem_bw_source == "utilization"
    assert reading.mem_bw_util == pytest.approx(0.61)
    assert reading.mem_bw_gbs is None
    assert reading.sm_util == pytest.approx(0.97) and reading.sm_util_source == "utilization"
    assert reading.peak_bw_gbs == 2039 and reading.peak_bw_source == "preset"
    assert "no GPM" in reading.reason


def test_peak_from_clock_and_bus_when_no_preset_is_close(monkeypatch):
    # an A100 PCIe 40GB: its name finds the 80GB PCIe preset (1935), but the clocks say 1555
    FakeNvml([FakeGpu(name="NVIDIA A100-PCIE-40GB", max_mem_clock_mhz=1215, bus_width_bits=5120, gpm=False)]).install(monkeypatch)
    with GpuSampler() as sampler:
        reading = sampler.sample().devices[0]
    assert reading.peak_bw_source == "clock"
    assert reading.peak_bw_gbs == pytest.approx(1215e6 * 2 * 5120 / 8 / 1e9)


def test_gpm_failing_mid_run_falls_back_to_busy_time(monkeypatch):
    FakeNvml([FakeGpu(gpm_get_error=pynvml.NVML_ERROR_NOT_SUPPORTED)]).install(monkeypatch)
    with GpuSampler() as sampler:
        reading = sampler.sample().devices[0]
        later = sampler.sample().devices[0]
    assert reading.mem_bw_source == "utilization" and reading.mem_bw_gbs is None
    assert "GPM failed" in reading.reason
    assert later.mem_bw_source == "utilization"


def test_two_gpus(monkeypatch):
    FakeNvml([FakeGpu(dram_pct=[10.0]), FakeGpu(name="NVIDIA H100 80GB HBM3", max_mem_clock_mhz=2619,
                                                bus_width_bits=5120, dram_pct=[80.0])]).install(monkeypatch)
    with GpuSampler() as sampler:
        devices = sampler.sample().devices
    assert [d.index for d in devices] == ["0", "1"]
    assert devices[0].mem_bw_gbs == pytest.approx(480)
    assert devices[1].peak_bw_gbs == 3350
    assert devices[1].mem_bw_gbs == pytest.approx(0.8 * 3350)


def test_mig_devices_are_the_leaves(monkeypatch):
    gpu = FakeGpu(name="NVIDIA H100 80GB HBM3", mig=[("NVIDIA H100 80GB HBM3 MIG 1g.10gb", 7, 10 * GIB),
                                                     ("NVIDIA H100 80GB HBM3 MIG 3g.40gb", 2, 40 * GIB)],
                  dram_pct=[30.0])
    FakeNvml([gpu]).install(monkeypatch)
    with GpuSampler() as sampler:
        devices = sampler.sample().devices
    assert [(d.index, d.is_mig) for d in devices] == [("0/0", True), ("0/1", True)]
    assert devices[1].name.endswith("3g.40gb")
    assert devices[1].mem_total_bytes == 40 * GIB
    assert devices[0].mem_bw_source == "gpm" and devices[0].mem_bw_util == pytest.approx(0.3)
    assert devices[0].mem_bw_gbs is None and "MIG" in devices[0].reason
    assert devices[0].mem_clock_mhz == 3201  # read on the parent: MIG handles refuse clocks


def test_server_gpu_memory_found_by_port_through_the_engine_child(monkeypatch, tmp_path):
    """The API process listens; its child (vLLM's EngineCore) holds the GPU memory."""
    script = tmp_path / "server.py"
    script.write_text(
        "import socket, subprocess, sys\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(s.getsockname()[1], child.pid, flush=True)\n"
        "sys.stdin.read(); child.kill()\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port, child_pid = map(int, proc.stdout.readline().split())
        gpu = FakeGpu(processes=[(child_pid, 70 * GIB), (1, 5 * GIB)], gpm=False)
        FakeNvml([gpu]).install(monkeypatch)
        with GpuSampler(server_port=port) as sampler:
            reading = sampler.sample().devices[0]
        assert reading.server_mem_bytes == 70 * GIB
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def test_tensor_activity_versions_and_both_peaks(monkeypatch):
    FakeNvml([FakeGpu(tensor_pct=41.0)], driver="580.159.03").install(monkeypatch)
    with GpuSampler() as sampler:
        reading = sampler.sample().devices[0]
        assert sampler.versions == {"driver": "580.159.03", "nvml": "13.580.159.03", "cuda": "13.0"}
    assert reading.tensor_util == pytest.approx(0.41)
    assert reading.gpm_status == "ok"
    assert reading.peak_bw_gbs == 4800 and reading.peak_bw_clock_gbs == pytest.approx(3201e6 * 2 * 6144 / 8 / 1e9)


def test_a_tensor_metric_gpm_lacks_is_none_and_said(monkeypatch):
    FakeNvml([FakeGpu(tensor_pct=None)]).install(monkeypatch)
    with GpuSampler() as sampler:
        reading = sampler.sample().devices[0]
    assert reading.mem_bw_source == "gpm" and reading.tensor_util is None
    assert "ANY_TENSOR_UTIL" in reading.reason


@pytest.mark.parametrize(("gpu", "status"), [
    (FakeGpu(gpm=False), "unsupported"),
    (FakeGpu(gpm_support_error=pynvml.NVML_ERROR_NO_PERMISSION), "no_permission"),
    (FakeGpu(gpm_support_error=pynvml.NVML_ERROR_FUNCTION_NOT_FOUND), "unsupported"),
    (FakeGpu(gpm_get_error=pynvml.NVML_ERROR_NO_PERMISSION, gpm_get_error_from=0), "no_permission"),
    (FakeGpu(gpm_get_error=pynvml.NVML_ERROR_UNKNOWN), "failed"),
])
def test_why_gpm_is_missing_is_said_in_a_word(monkeypatch, gpu, status):
    FakeNvml([gpu]).install(monkeypatch)
    with GpuSampler() as sampler:
        reading = sampler.sample().devices[0]
    assert reading.gpm_status == status
    assert reading.mem_bw_source == "utilization" and reading.mem_bw_gbs is None and reading.tensor_util is None
