"""`make gpu-check` (scripts/gpu_check.py): this machine's real no-GPU path, and the NVML stand-in's GPUs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pynvml
import pytest

from tests.cli.running import assert_one_clear_line
from tests.fixtures.fake_pynvml import FakeGpu, FakeNvml
from tests.loopback import closed_port_url
from tui.cli import gpu_check
from tui.cli.gpu_check import main

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.py"
NOT_ON_A_BARE_HOST = ("textual", "pydantic", "pydantic_settings", "httpx", "aiohttp", "orjson", "uvloop", "numpy",
                      "starlette", "uvicorn", "platformdirs", "prometheus_client", "textual_plotext")
"""What a bare GPU host's python3 may lack: the copy path must need none of it."""
FAST = ["--seconds", "0.4", "--interval", "0.2"]
CHECKS = ["driver", "peak", "gpm", "idle", "load", "bandwidth", "activity"]


def run_script(*argv: str, blocked: tuple[str, ...] = NOT_ON_A_BARE_HOST) -> subprocess.CompletedProcess:
    """The script as a shell runs it, under a Python where the `blocked` packages cannot be imported."""
    blocker = textwrap.dedent("""
        import importlib.abc, runpy, sys
        blocked = set(sys.argv[1].split(","))
        class Absent(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] in blocked:
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        sys.meta_path.insert(0, Absent())
        sys.argv = sys.argv[2:]
        runpy.run_path(sys.argv[0], run_name="__main__")
    """)
    return subprocess.run([sys.executable, "-c", blocker, ",".join(blocked), str(SCRIPT), *argv],
                          capture_output=True, text=True, timeout=60)


def lines_of(out: str) -> dict[str, str]:
    """Check name → its line; the summary comes last."""
    lines = out.strip().splitlines()
    assert lines[-1].startswith("gpu-check: "), out
    return {line.split("]", 1)[1].split(":", 1)[0].strip(): line for line in lines[:-1]}


@pytest.fixture(autouse=True)
def no_torch(monkeypatch):
    """The copy needs torch and a GPU; the tests that drive a load use --url or say it is skipped."""
    monkeypatch.setattr(gpu_check, "torch_installed", lambda: False)


def test_no_driver_here_exits_0_with_one_line_on_a_bare_host():
    result = run_script()
    assert result.returncode == 0, result.stderr
    assert result.stdout == ("no GPU here: no NVIDIA driver here (NVML: NVML Shared Library Not Found); "
                             "nothing to check\n")
    assert result.stderr == ""
    doc = json.loads(run_script("--json").stdout)
    assert doc["gpu"] is False and doc["checks"] == [] and "NVML Shared Library Not Found" in doc["reason"]


def test_without_nvidia_ml_py_there_is_no_gpu_to_check():
    result = run_script(blocked=(*NOT_ON_A_BARE_HOST, "pynvml"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("no GPU here: no GPU telemetry: nvidia-ml-py (pynvml) is not installed")


def test_without_psutil_one_line_says_what_is_missing():
    result = run_script(blocked=(*NOT_ON_A_BARE_HOST, "psutil"))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("gpu-check: psutil is not installed") and len(result.stderr.splitlines()) == 1


def test_nvml_that_will_not_start_is_no_gpu(monkeypatch, capsys):
    FakeNvml([FakeGpu()], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED).install(monkeypatch)
    assert main(FAST) == 0
    assert capsys.readouterr().out.startswith("no GPU here: the NVIDIA driver is not loaded")


def test_a_gpu_with_gpm_one_line_per_check_with_figures(monkeypatch, capsys):
    FakeNvml([FakeGpu(dram_pct=[1.0], tensor_pct=0.0)]).install(monkeypatch)
    assert main(["--no-load", *FAST]) == 0
    lines = lines_of(capsys.readouterr().out)
    assert list(lines) == CHECKS
    assert lines["driver"] == ("[ ok ] driver: NVIDIA driver 580.159.03, NVML 13.580.159.03, CUDA 13.0, "
                               f"nvidia-ml-py {pynvml_version()}; 1 GPU: 0 NVIDIA H200")
    assert "published 4,800 GB/s and 989 TFLOP/s dense bf16" in lines["peak"] and "4,917 GB/s (+2.4%)" in lines["peak"]
    assert lines["gpm"].startswith("[ ok ] gpm: supported and readable by this user")
    assert lines["idle"] == "[ ok ] idle: DRAM 48 GB/s (1% of 4,800 GB/s), SM 88%, tensor 0% over 2 windows of 0.2 s"
    assert lines["load"].startswith("[skip] load: --no-load")
    assert lines["bandwidth"].startswith("[skip]") and lines["activity"].startswith("[skip]")


def test_gpm_unsupported_falls_back_to_busy_time_and_says_so(monkeypatch, capsys):
    FakeNvml([FakeGpu(name="NVIDIA A100-SXM4-80GB", max_mem_clock_mhz=1593, bus_width_bits=5120, gpm=False,
                      util_memory=2, util_gpu=0)]).install(monkeypatch)
    assert main(["--no-load", *FAST]) == 0
    lines = lines_of(capsys.readouterr().out)
    assert lines["gpm"].startswith("[warn] gpm: none on this GPU or driver")
    assert "falls back to NVML's memory busy time, a duty cycle that is never GB/s" in lines["gpm"]
    assert lines["idle"] == ("[ ok ] idle: memory busy 2% of the time (a duty cycle, not bandwidth), kernels running "
                             "0% of the time over 2 windows of 0.2 s")


def test_permission_denied_says_so_and_how_to_fix_it(monkeypatch, capsys):
    FakeNvml([FakeGpu(gpm_get_error=pynvml.NVML_ERROR_NO_PERMISSION, gpm_get_error_from=0)]).install(monkeypatch)
    assert main(["--no-load", *FAST]) == 1
    lines = lines_of(capsys.readouterr().out)
    assert lines["gpm"].startswith("[FAIL] gpm: permission denied to this user (uid ")
    assert "NoPermission" in lines["gpm"] and "NVreg_RestrictProfilingToAdminUsers" in lines["gpm"]
    assert "memory busy" in lines["idle"]


def test_torch_absent_and_no_url_is_said_and_skipped(monkeypatch, capsys):
    FakeNvml([FakeGpu()]).install(monkeypatch)
    assert main(FAST) == 0
    lines = lines_of(capsys.readouterr().out)
    assert lines["load"].startswith("[skip] load: torch is not installed here and no --url was given")
    assert lines["bandwidth"] == "[skip] bandwidth: no load ran, so nothing to measure"


def test_decode_on_the_simulator_drives_the_check(monkeypatch, capsys, sim_url, isolated):
    FakeNvml([FakeGpu(dram_pct=[1.0, 1.0, 1.0, 60.0], tensor_pct=4.0)]).install(monkeypatch)
    code = main(["--url", sim_url, "--max-tokens", "64", "--json", *FAST])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [c["name"] for c in doc["checks"]] == CHECKS
    load = doc["load"]
    assert load["kind"] == "decode" and load["simulated"] is True and load["streams"] == 1
    assert load["decode_tok_s"] > 0  # the simulator's own counter over the sampled window
    assert load["seconds"] == pytest.approx(0.4, abs=0.3)
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["load"]["verdict"] == "warn" and "phasetop's simulator" in checks["load"]["line"]
    bandwidth = checks["bandwidth"]
    assert bandwidth["figures"]["mem_bw_gbs"] == pytest.approx(0.6 * 4800)
    assert "NVML (GPM) DRAM 2,880 GB/s (60% of 4,800 GB/s) during decode" in bandwidth["line"]
    assert len(doc["samples"]["load"]) == 2 and len(doc["samples"]["idle"]) == 2


def test_a_server_that_is_not_there_fails_the_load_line(monkeypatch, capsys, isolated):
    FakeNvml([FakeGpu()]).install(monkeypatch)
    assert main(["--url", closed_port_url(), *FAST]) == 1
    out, err = capsys.readouterr()
    lines = lines_of(out)
    assert lines["load"].startswith("[FAIL] load: decode on http://127.0.0.1:") and "did not run" in lines["load"]
    assert lines["bandwidth"].startswith("[skip]")
    assert "Traceback" not in err


@pytest.mark.parametrize("argv", [["--interval", "0.05"], ["--seconds", "0.1", "--interval", "0.2"],
                                  ["--copy-mib", "0"], ["--gpu", "7"], ["--url", "ftp://x"]])
def test_bad_values_are_one_line_usage_errors(monkeypatch, capsys, argv, isolated):
    FakeNvml([FakeGpu()]).install(monkeypatch)
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert_one_clear_line(code, err, "gpu-check")


def pynvml_version() -> str:
    from importlib.metadata import version

    return version("nvidia-ml-py")
