"""The GPU check's verdicts: one line per check, from the NVML sampler's readings and the load that drove the GPU.

Pure: the readings come from `tui.sources.gpu` (the sampler the UI and `phasetop gpu` use), the load's own figures
from `tui.sources.workloads.copy_load` or `tui.sources.workloads.decode_load`. Each check says ok, warn, FAIL or skip, with its numbers
and the device's published peak beside them; a FAIL makes the check exit 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tui.core.hardware.devices import Device, UnknownDeviceError, find_device
from tui.core.telemetry.readings import GpuReading

MARKS = {"ok": "[ ok ]", "warn": "[warn]", "fail": "[FAIL]", "skip": "[skip]"}

PRESET_TOLERANCE = 0.10
"""NVML's clock × bus figure within this share of the published one is the same part (as the sampler decides)."""
IDLE_SHARE = 0.05
"""Above this share of the peak before any load, something else is using the GPU."""
AGREEMENT = 0.15
"""NVML's GB/s within this share of the copy's own count of bytes over time: the two agree."""
SLOW_COPY_SHARE = 0.5
"""A plain copy below this share of the published peak: a throttled, shared or misidentified GPU."""
OTHER_PEAK_SHARE = 0.01
"""NVML's clock × bus peak this far from the one in use is worth a second GB/s figure beside the copy's."""
SUSPECT_ZERO_SHARE = 0.01
"""GPM below this share of the peak while a load runs reads as zero: a counter that is not counting."""
COPY_TENSOR_SHARE = 0.05
"""A plain copy uses no tensor cores: tensor activity above this share under it is another process's."""

GPM_FIX = (
    "Fix: run the check as root (sudo), or let every user read the GPU's performance counters: "
    "`options nvidia NVreg_RestrictProfilingToAdminUsers=0` in a file under /etc/modprobe.d, then reload the nvidia "
    "module or reboot (the profilers' switch, which GPM is expected to follow)"
)
GPM_FIX_AS_ROOT = (
    "NVML refused even root: in a container the host's driver decides (the same NVreg_RestrictProfilingToAdminUsers "
    "switch, on the host); under vGPU only full-instance profiles have GPM"
)
NOT_THIS_GPU = "the simulator does not use this GPU, so these figures are other work's"
COUNTERS_SHARED = "DCGM's profiling metrics and Nsight use the same counters: stop them while checking"


@dataclass(frozen=True, slots=True)
class Check:
    """One verdict line."""

    name: str
    verdict: str
    """"ok", "warn", "fail" or "skip"."""
    text: str
    figures: dict[str, Any] = field(default_factory=dict[str, Any])
    """The numbers behind the line, for --json."""

    @property
    def line(self) -> str:
        return f"{MARKS[self.verdict]} {self.name}: {self.text}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "verdict": self.verdict, "line": self.line, "figures": dict(self.figures)}


@dataclass(frozen=True, slots=True)
class CopyRun:
    """A plain device-to-device copy's own count: each copy reads and writes the buffer, so bytes are 2 × size."""

    buffer_mib: int
    bytes_moved: int
    seconds: float
    device: str
    """The device as torch names it."""
    torch_version: str | None = None

    @property
    def gbs(self) -> float:
        return self.bytes_moved / self.seconds / 1e9

    def to_json(self) -> dict[str, Any]:
        return {"kind": "copy", "buffer_mib": self.buffer_mib, "bytes_moved": self.bytes_moved, "seconds": self.seconds,
                "device": self.device, "torch_version": self.torch_version, "copy_gbs": self.gbs}


@dataclass(frozen=True, slots=True)
class DecodeRun:
    """Decode on a server the user named, over the sampling window."""

    url: str
    model: str
    streams: int
    prompt_tokens: int
    max_tokens: int
    seconds: float
    """The sampling window the figures below span."""
    decode_tok_s: float | None
    """Generated tokens a second over the window, from the server's own counter; None where it has no /metrics."""
    est_read_gbs: float | None = None
    """vLLM's model-based estimate of bytes read per GPU (`--enable-mfu-metrics`), GB/s over the window."""
    simulated: bool = False
    """The server is phasetop's simulator: its decode runs on its own clock, not on this GPU."""
    note: str | None = None
    """Why a figure is missing (no /metrics)."""

    def to_json(self) -> dict[str, Any]:
        return {"kind": "decode", "url": self.url, "model": self.model, "streams": self.streams,
                "prompt_tokens": self.prompt_tokens, "max_tokens": self.max_tokens, "seconds": self.seconds,
                "decode_tok_s": self.decode_tok_s, "est_read_gbs": self.est_read_gbs, "simulated": self.simulated,
                "note": self.note}


@dataclass(frozen=True, slots=True)
class NoLoad:
    """No load ran: skipped (torch absent and no --url, or --no-load) or failed to start."""

    reason: str
    failed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"kind": None, "reason": self.reason, "failed": self.failed}


Load = CopyRun | DecodeRun | NoLoad


def _gbs(value: float) -> str:
    return f"{value:,.0f} GB/s"


def _pct(share: float | None) -> str:
    return "–" if share is None else f"{share * 100:.0f}%"


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _windows(a: dict[str, Any], interval_s: float) -> str:
    """"5 windows of 0.5 s", and how many were left out of the means for another source (GPM failing in one)."""
    n, other = a["windows"], a["windows_of_another_source"]
    text = f"{n} window{'s' if n != 1 else ''} of {interval_s:g} s"
    return f"{text}, {other} without GPM left out" if other else text


def published(name: str) -> Device | None:
    """The device table's row for an NVML name, or None."""
    try:
        return find_device(name)
    except UnknownDeviceError:
        return None


def driver_check(versions: dict[str, str | None], binding_version: str | None, devices: Sequence[GpuReading]) -> Check:
    parts = [f"NVIDIA driver {versions.get('driver') or '?'}", f"NVML {versions.get('nvml') or '?'}"]
    if versions.get("cuda"):
        parts.append(f"CUDA {versions['cuda']}")
    parts.append(f"nvidia-ml-py {binding_version or '?'}")
    listed = ", ".join(f"{d.index} {d.name}" for d in devices)
    figures = {**versions, "nvidia_ml_py": binding_version, "devices": [d.index for d in devices]}
    return Check("driver", "ok", f"{', '.join(parts)}; {len(devices)} GPU{'s' if len(devices) != 1 else ''}: {listed}",
                 figures)


def peak_check(reading: GpuReading) -> Check:
    """The published peak beside NVML's clock × bus figure, and which one phasetop divides by."""
    row = published(reading.name)
    figures = {"published_bw_gbs": row.mem_bandwidth_gbs if row else None,
               "published_bf16_tflops": row.peak_bf16_tflops if row else None,
               "clock_bw_gbs": reading.peak_bw_clock_gbs, "peak_bw_gbs": reading.peak_bw_gbs,
               "peak_bw_source": reading.peak_bw_source}
    where = f"GPU {reading.index} {reading.name}"
    if reading.is_mig:
        return Check("peak", "warn", f"{where} is a MIG instance: no GB/s (a GPU instance's share of the peak is not "
                     "published); GPM's share of the instance's bandwidth is shown instead", figures)
    if reading.peak_bw_gbs is None:
        return Check("peak", "fail", f"{where}: no peak bandwidth (not in the device table, and NVML gave no memory "
                     f"clock or bus width: {reading.reason or 'no reason given'})", figures)
    clock = reading.peak_bw_clock_gbs
    if row is None:
        return Check("peak", "warn", f"{where} is not in phasetop's device table: phasetop divides by NVML's clock × "
                     f"bus {_gbs(reading.peak_bw_gbs)}, and knows no published compute peak", figures)
    stated = (f"published {_gbs(row.mem_bandwidth_gbs)} and {row.peak_bf16_tflops:,.0f} TFLOP/s dense bf16 "
              f"(the {row.name} row)")
    if clock is None:
        return Check("peak", "warn", f"{where}: {stated}; NVML gave no clock × bus figure to compare "
                     f"({reading.reason or 'no reason given'})", figures)
    off = clock / row.mem_bandwidth_gbs - 1
    nvml = f"NVML's clock × bus {_gbs(clock)} ({off:+.1%})"
    if reading.peak_bw_source == "clock":
        return Check("peak", "warn", f"{where}: {stated}, but {nvml} is another part: phasetop divides by NVML's "
                     "figure", figures)
    return Check("peak", "ok", f"{where}: {stated}; {nvml}; phasetop divides by the published "
                 f"{_gbs(reading.peak_bw_gbs)}", figures)


def gpm_check(readings: Sequence[GpuReading], user: str, is_root: bool, interval_s: float) -> Check:
    """Whether GPM answered for this GPU and this user in every window, and what the fallback is where it did not."""
    missed = [r for r in readings if r.gpm_status != "ok"]
    reading = missed[0] if missed else readings[-1]
    status = reading.gpm_status
    fallback = "bandwidth falls back to NVML's memory busy time, a duty cycle that is never GB/s"
    why = f" (NVML: {reading.reason})" if reading.reason else ""
    if missed and len(missed) < len(readings):
        why += f" in {len(missed)} of {len(readings)} windows"
    figures = {"gpm_status": status, "user": user, "windows": len(readings), "windows_without_gpm": len(missed)}
    if status == "ok":
        return Check("gpm", "ok", f"supported and readable by this user ({user}): DRAM bandwidth, SM and tensor "
                     f"activity in all {len(readings)} windows of {interval_s:g} s", figures)
    if status == "unsupported":
        return Check("gpm", "warn", f"none on this GPU or driver (GPM is Hopper and newer, from driver R520){why}: "
                     f"{fallback}, and tensor activity is unknown", figures)
    if status == "no_permission":
        fix = GPM_FIX_AS_ROOT if is_root else GPM_FIX
        return Check("gpm", "fail", f"permission denied to this user ({user}){why}: {fallback}. {fix}", figures)
    return Check("gpm", "fail", f"failed{why}: {fallback}. {COUNTERS_SHARED}", figures)


def _source(readings: Sequence[GpuReading], field: str) -> str | None:
    """GPM where any window had it, else what the last one had: a mean never mixes GPM with busy time."""
    sources = [getattr(r, field) for r in readings]
    return "gpm" if "gpm" in sources else (sources[-1] if sources else None)


def _activity(readings: Sequence[GpuReading]) -> dict[str, Any]:
    """Means over the windows of one source: DRAM GB/s and share, SM and tensor activity, and GB/s's range."""
    memory_source, sm_source = _source(readings, "mem_bw_source"), _source(readings, "sm_util_source")
    memory = [r for r in readings if r.mem_bw_source == memory_source]
    sm = [r for r in readings if r.sm_util_source == sm_source]
    gbs = [r.mem_bw_gbs for r in memory if r.mem_bw_gbs is not None]
    return {
        "mem_bw_gbs": _mean(gbs),
        "mem_bw_gbs_min": min(gbs) if gbs else None,
        "mem_bw_gbs_max": max(gbs) if gbs else None,
        "mem_bw_util": _mean([r.mem_bw_util for r in memory]),
        "mem_bw_source": memory_source,
        "sm_util": _mean([r.sm_util for r in sm]),
        "sm_util_source": sm_source,
        "tensor_util": _mean([r.tensor_util for r in readings]),
        "windows": len(memory),
        "windows_of_another_source": len(readings) - len(memory),
    }


def _dram_words(a: dict[str, Any], peak: float | None) -> str:
    if a["mem_bw_source"] == "gpm" and a["mem_bw_gbs"] is not None:
        return f"DRAM {_gbs(a['mem_bw_gbs'])} ({_pct(a['mem_bw_util'])} of {_gbs(peak)})" if peak else \
            f"DRAM {_gbs(a['mem_bw_gbs'])}"
    if a["mem_bw_source"] == "gpm":
        return f"DRAM {_pct(a['mem_bw_util'])} of its bandwidth (GPM, no GB/s)"
    if a["mem_bw_source"] == "utilization":
        return f"memory busy {_pct(a['mem_bw_util'])} of the time (a duty cycle, not bandwidth)"
    return "DRAM –"


def _sm_words(a: dict[str, Any]) -> str:
    if a["sm_util_source"] == "utilization":
        return f"kernels running {_pct(a['sm_util'])} of the time"
    return f"SM {_pct(a['sm_util'])}, tensor {_pct(a['tensor_util'])}"


def idle_check(readings: Sequence[GpuReading], interval_s: float) -> Check:
    """Before the load: a busy GPU shares its bandwidth with the load, and its figures include the other work."""
    a = _activity(readings)
    if not readings or a["mem_bw_source"] is None:
        return Check("idle", "warn", "no reading before the load", a)
    peak = readings[-1].peak_bw_gbs
    text = f"{_dram_words(a, peak)}, {_sm_words(a)} over {_windows(a, interval_s)}"
    if a["mem_bw_util"] is not None and a["mem_bw_util"] > IDLE_SHARE:
        return Check("idle", "warn", f"{text}: the GPU is not idle, so the figures under load include other work", a)
    return Check("idle", "ok", text, a)


def load_check(load: Load, peak: float | None) -> Check:
    """What drove the GPU, by its own count."""
    if isinstance(load, NoLoad):
        return Check("load", "fail" if load.failed else "skip", load.reason, load.to_json())
    if isinstance(load, CopyRun):
        share = load.gbs / peak if peak else None
        text = (f"device-to-device copy of 2 × {load.buffer_mib:,} MiB on {load.device} for {load.seconds:.1f} s: "
                f"{_gbs(load.gbs)} (bytes × 2 / time)")
        if peak:
            text += f" = {_pct(load.gbs / peak)} of the {_gbs(peak)} peak"
        if share is not None and share < SLOW_COPY_SHARE:
            return Check("load", "warn", f"{text}: slow for a plain copy (throttled, shared, or not this part)",
                         load.to_json())
        return Check("load", "ok", text, load.to_json())
    what = (f"decode on {load.url} ({load.model}): {load.streams} stream{'s' if load.streams != 1 else ''} of "
            f"{load.prompt_tokens}-token prompts, {load.max_tokens} tokens each")
    if load.decode_tok_s is None:
        return Check("load", "warn", f"{what}; tokens a second unknown ({load.note or 'no server counter'})",
                     load.to_json())
    text = f"{what}: {load.decode_tok_s:,.0f} tok/s over {load.seconds:.1f} s (the server's counter)"
    if load.decode_tok_s <= 0:
        return Check("load", "fail", f"{text}: nothing decoded while the GPU was sampled", load.to_json())
    if load.simulated:
        return Check("load", "warn", f"{text}; the server is phasetop's simulator, which decodes on its own clock, "
                     "not on this GPU", load.to_json())
    return Check("load", "ok", text, load.to_json())


def bandwidth_check(load: Load, readings: Sequence[GpuReading], interval_s: float) -> Check:
    """NVML's DRAM reading under the load, beside the load's own figure and the peak."""
    if isinstance(load, NoLoad) or not readings:
        return Check("bandwidth", "skip", "no load ran, so nothing to measure")
    a = _activity(readings)
    peak = readings[-1].peak_bw_gbs
    during = "the copy" if isinstance(load, CopyRun) else "decode"
    spread = _windows(a, interval_s)
    if a["mem_bw_gbs_min"] is not None:
        spread += f", {a['mem_bw_gbs_min']:,.0f}–{a['mem_bw_gbs_max']:,.0f}"
    if a["mem_bw_source"] != "gpm":
        text = f"no GB/s from NVML without GPM; {_dram_words(a, peak)} during {during} ({spread})"
        if isinstance(load, CopyRun):
            text += f"; the copy's own {_gbs(load.gbs)}"
        return Check("bandwidth", "warn", text, a)
    if a["mem_bw_gbs"] is None:
        return Check("bandwidth", "warn", f"{_dram_words(a, peak)} during {during} ({spread})", a)
    text = f"NVML (GPM) {_dram_words(a, peak)} during {during} ({spread})"
    if isinstance(load, DecodeRun) and load.simulated:
        return Check("bandwidth", "warn", f"{text}: {NOT_THIS_GPU}", a)
    if a["mem_bw_util"] is not None and a["mem_bw_util"] < SUSPECT_ZERO_SHARE:
        return Check("bandwidth", "fail", f"{text}: zero under load, a counter that is not counting "
                     f"(windows under 100 ms, or counters held elsewhere: {COUNTERS_SHARED})", a)
    if isinstance(load, CopyRun):
        ratio = a["mem_bw_gbs"] / load.gbs
        a["nvml_over_copy"] = ratio
        text += f"; the copy's own {_gbs(load.gbs)}: NVML / copy = {ratio:.2f}"
        clock = readings[-1].peak_bw_clock_gbs
        if clock and peak and abs(clock / peak - 1) > OTHER_PEAK_SHARE and a["mem_bw_util"] is not None:
            # GPM's share is of a maximum NVML does not name: the copy tells which peak it is
            a["mem_bw_gbs_on_clock_peak"] = on_clock = a["mem_bw_util"] * clock
            text += f" (× NVML's clock × bus peak instead: {_gbs(on_clock)}, {on_clock / load.gbs:.2f})"
        if abs(ratio - 1) > AGREEMENT:
            assumed = f"the {_gbs(peak)}" if peak else "a peak"
            return Check("bandwidth", "warn", f"{text}, more than {AGREEMENT:.0%} apart (GPM's figure is a share of "
                         f"{assumed} phasetop assumes, so a wrong peak scales it)", a)
        return Check("bandwidth", "ok", text, a)
    if load.est_read_gbs is not None:
        a["nvml_over_estimate"] = a["mem_bw_gbs"] / load.est_read_gbs if load.est_read_gbs > 0 else None
        text += f"; vLLM's estimate of bytes read {_gbs(load.est_read_gbs)}"
        if a["nvml_over_estimate"] is not None:
            text += f" (NVML / estimate = {a['nvml_over_estimate']:.2f})"
    return Check("bandwidth", "ok", text, a)


def activity_check(load: Load, readings: Sequence[GpuReading]) -> Check:
    """SM and tensor activity beside DRAM's share: a memory-bound load keeps DRAM busy and tensor cores idle."""
    if isinstance(load, NoLoad) or not readings:
        return Check("activity", "skip", "no load ran")
    a = _activity(readings)
    during = "the copy" if isinstance(load, CopyRun) else "decode"
    if a["sm_util_source"] != "gpm" or a["tensor_util"] is None:
        return Check("activity", "warn", f"{_sm_words(a)} during {during} (without GPM's SM and tensor counters, "
                     "time with any kernel running; it says nothing of how much of the GPU works)", a)
    dram, tensor = a["mem_bw_util"] or 0.0, a["tensor_util"]
    text = f"SM {_pct(a['sm_util'])}, tensor {_pct(tensor)} beside DRAM {_pct(dram)} during {during}"
    if isinstance(load, DecodeRun) and load.simulated:
        return Check("activity", "warn", f"{text}: {NOT_THIS_GPU}", a)
    if isinstance(load, CopyRun) and tensor > COPY_TENSOR_SHARE:
        return Check("activity", "warn", f"{text}: a copy uses no tensor cores, so another process does", a)
    if dram > tensor:
        return Check("activity", "ok", f"{text}: memory bound, the signature of decode", a)
    return Check("activity", "warn", f"{text}: tensor cores as busy as memory, so not memory bound "
                 "(a batch large enough to be compute bound, or prefill)", a)


def summary_line(checks: Sequence[Check]) -> str:
    counts = {v: sum(1 for c in checks if c.verdict == v) for v in MARKS}
    parts = [f"{counts[v]} {word}" for v, word in (("ok", "ok"), ("warn", "warn"), ("fail", "FAIL"), ("skip", "skip"))
             if counts[v]]
    return f"gpu-check: {', '.join(parts)} ({len(checks)} checks)"
