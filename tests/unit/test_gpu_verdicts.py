"""The GPU check's verdicts from readings and loads: which line says ok, warn or FAIL, and with which figures."""

from __future__ import annotations

import pytest

from tui.core.hardware.gpu_check import (
    Check,
    CopyRun,
    DecodeRun,
    NoLoad,
    activity_check,
    bandwidth_check,
    gpm_check,
    idle_check,
    load_check,
    peak_check,
    summary_line,
)
from tui.core.telemetry.readings import GpuReading

H200 = dict(index="0", name="NVIDIA H200", peak_bw_gbs=4800.0, peak_bw_source="preset", peak_bw_clock_gbs=4917.0)


def gpm(share: float, sm: float = 0.3, tensor: float = 0.0) -> GpuReading:
    return GpuReading(**H200, mem_bw_util=share, mem_bw_gbs=share * 4800, mem_bw_source="gpm", sm_util=sm,
                      sm_util_source="gpm", tensor_util=tensor, gpm_status="ok")


def busy_time(share: float) -> GpuReading:
    return GpuReading(**H200, mem_bw_util=share, mem_bw_source="utilization", sm_util=1.0, sm_util_source="utilization",
                      gpm_status="unsupported", reason="no GPM on this GPU (Hopper or newer has it)")


COPY = CopyRun(buffer_mib=1024, bytes_moved=int(4300e9 * 6), seconds=6.0, device="NVIDIA H200", torch_version="2.11.0")


def decode(**overrides) -> DecodeRun:
    fields = dict(url="http://127.0.0.1:8000", model="m", streams=1, prompt_tokens=16, max_tokens=512, seconds=5.0,
                  decode_tok_s=300.0)
    return DecodeRun(**{**fields, **overrides})


def test_the_copy_and_nvml_agree_within_15_percent():
    check = bandwidth_check(COPY, [gpm(0.88), gpm(0.90)], 0.5)
    assert check.verdict == "ok"
    assert "NVML (GPM) DRAM 4,272 GB/s (89% of 4,800 GB/s) during the copy (2 windows of 0.5 s, 4,224–4,320)" in check.text
    assert "the copy's own 4,300 GB/s: NVML / copy = 0.99" in check.text
    assert check.figures["nvml_over_copy"] == pytest.approx(4272 / 4300)
    # GPM's share is of a maximum NVML does not name: on the clock × bus peak the same share is 4,376 GB/s
    assert "(× NVML's clock × bus peak instead: 4,376 GB/s, 1.02)" in check.text


def test_the_copy_and_nvml_far_apart_is_a_warning_that_names_the_peak():
    check = bandwidth_check(COPY, [gpm(0.5)], 0.5)
    assert check.verdict == "warn"
    assert "NVML / copy = 0.56" in check.text and "4,800 GB/s phasetop assumes" in check.text


def test_far_apart_on_a_gpu_with_no_known_peak_still_warns():
    unknown = GpuReading(index="0", name="NVIDIA Next", mem_bw_util=0.5, mem_bw_gbs=2000.0, mem_bw_source="gpm",
                         gpm_status="ok")
    check = bandwidth_check(COPY, [unknown], 0.5)
    assert check.verdict == "warn" and "NVML / copy = 0.47" in check.text and "a peak phasetop assumes" in check.text


def test_zero_from_gpm_under_load_fails():
    check = bandwidth_check(COPY, [gpm(0.0)], 0.5)
    assert check.verdict == "fail" and "not counting" in check.text


def test_without_gpm_no_gb_s_comes_from_busy_time():
    check = bandwidth_check(COPY, [busy_time(0.99)], 0.5)
    assert check.verdict == "warn"
    assert "no GB/s from NVML without GPM; memory busy 99% of the time (a duty cycle, not bandwidth)" in check.text
    assert check.figures["mem_bw_gbs"] is None
    activity = activity_check(COPY, [busy_time(0.99)])
    assert activity.verdict == "warn" and "kernels running 100% of the time" in activity.text


def test_decode_beside_vllms_own_estimate():
    check = bandwidth_check(decode(est_read_gbs=2000.0), [gpm(0.5)], 0.5)
    assert check.verdict == "ok"
    assert "vLLM's estimate of bytes read 2,000 GB/s (NVML / estimate = 1.20)" in check.text


def test_a_simulator_never_passes_for_this_gpu():
    for check in (bandwidth_check(decode(simulated=True), [gpm(0.0)], 0.5),
                  activity_check(decode(simulated=True), [gpm(0.5)]),
                  load_check(decode(simulated=True), 4800.0)):
        assert check.verdict == "warn" and "simulator" in check.text


def test_memory_bound_signature_and_its_opposite():
    assert activity_check(COPY, [gpm(0.9, tensor=0.0)]).verdict == "ok"
    assert "memory bound" in activity_check(decode(), [gpm(0.6, tensor=0.1)]).text
    compute = activity_check(decode(), [gpm(0.3, tensor=0.7)])
    assert compute.verdict == "warn" and "not memory bound" in compute.text
    assert activity_check(COPY, [gpm(0.9, tensor=0.2)]).verdict == "warn"  # a copy uses no tensor cores


def test_load_lines():
    copy = load_check(COPY, 4800.0)
    assert copy.verdict == "ok"
    assert copy.text == ("device-to-device copy of 2 × 1,024 MiB on NVIDIA H200 for 6.0 s: 4,300 GB/s "
                         "(bytes × 2 / time) = 90% of the 4,800 GB/s peak")
    assert load_check(CopyRun(1024, int(1000e9), 1.0, "x"), 4800.0).verdict == "warn"  # 21% of the peak
    assert load_check(decode(decode_tok_s=0.0), 4800.0).verdict == "fail"
    assert load_check(decode(decode_tok_s=None, note="no /metrics"), 4800.0).verdict == "warn"
    assert load_check(NoLoad("the copy failed: CUDA: out of memory", failed=True), 4800.0).verdict == "fail"
    assert load_check(NoLoad("torch is not installed"), 4800.0).verdict == "skip"
    assert bandwidth_check(NoLoad("x"), [], 0.5).verdict == "skip"


def test_peak_published_beside_nvmls_clock_figure():
    ok = peak_check(gpm(0.0))
    assert ok.verdict == "ok"
    assert "published 4,800 GB/s and 989 TFLOP/s dense bf16" in ok.text and "4,917 GB/s (+2.4%)" in ok.text
    far = peak_check(GpuReading(index="0", name="NVIDIA A100-PCIE-40GB", peak_bw_gbs=1555.2, peak_bw_source="clock",
                                peak_bw_clock_gbs=1555.2))
    assert far.verdict == "warn" and "another part" in far.text
    unknown = peak_check(GpuReading(index="0", name="NVIDIA Future X", peak_bw_gbs=1000.0, peak_bw_source="clock",
                                    peak_bw_clock_gbs=1000.0))
    assert unknown.verdict == "warn" and "not in phasetop's device table" in unknown.text
    assert peak_check(GpuReading(index="0", name="NVIDIA Future X")).verdict == "fail"


@pytest.mark.parametrize(("is_root", "words"), [(False, "run the check as root"), (True, "refused even root")])
def test_permission_denied_says_how_to_fix_it(is_root, words):
    reading = GpuReading(**H200, gpm_status="no_permission", reason="no GPM (NoPermission: Insufficient Permissions)")
    check = gpm_check([reading], "uid 1000, me", is_root, 0.5)
    assert check.verdict == "fail"
    assert check.text.startswith("permission denied to this user (uid 1000, me)")
    assert "falls back to NVML's memory busy time" in check.text and words in check.text
    assert "NVreg_RestrictProfilingToAdminUsers" in check.text


def test_gpm_states():
    assert gpm_check([gpm(0.1)], "uid 0, root", True, 0.5).verdict == "ok"
    unsupported = gpm_check([busy_time(0.1)], "uid 0, root", True, 0.5)
    assert unsupported.verdict == "warn" and "falls back to NVML's memory busy time" in unsupported.text
    failed = gpm_check([GpuReading(**H200, gpm_status="failed", reason="GPM failed: Unknown")], "uid 0", True, 0.5)
    assert failed.verdict == "fail" and "DCGM" in failed.text


def test_idle_that_is_not():
    assert idle_check([gpm(0.01)], 0.5).verdict == "ok"
    busy = idle_check([gpm(0.4)], 0.5)
    assert busy.verdict == "warn" and "not idle" in busy.text


def test_summary_counts_and_marks():
    checks = [Check("a", "ok", "x"), Check("b", "fail", "y"), Check("c", "skip", "z")]
    assert summary_line(checks) == "gpu-check: 1 ok, 1 FAIL, 1 skip (3 checks)"
    assert checks[1].line == "[FAIL] b: y"


def test_a_window_without_gpm_is_said_and_never_averaged_with_busy_time():
    hiccup = GpuReading(**H200, mem_bw_util=0.99, mem_bw_source="utilization", sm_util=1.0,
                        sm_util_source="utilization", gpm_status="failed", reason="GPM metrics: Unknown Error")
    readings = [gpm(0.8), hiccup, gpm(0.9)]
    check = bandwidth_check(COPY, readings, 0.5)
    assert check.figures["mem_bw_util"] == pytest.approx(0.85)  # the busy time's 99 % is not in the mean
    assert "2 windows of 0.5 s, 1 without GPM left out" in check.text
    assert activity_check(COPY, readings).figures["sm_util"] == pytest.approx(0.3)
    gpm_line = gpm_check(readings, "uid 0, root", True, 0.5)
    assert gpm_line.verdict == "fail" and "in 1 of 3 windows" in gpm_line.text
