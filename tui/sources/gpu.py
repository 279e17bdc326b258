"""NVML sampler: memory bandwidth, SM activity and memory per leaf GPU (sync; run it in a thread).

Bandwidth comes from GPM's DRAM_BW_UTIL (Hopper and newer), a share of the theoretical peak
measured over the window between two samples at least 100 ms apart, so it converts to GB/s.
Without GPM, NVML's `utilization.memory` is reported instead, labelled "utilization": it is the
share of time the memory was busy at all, not bytes moved, and is never converted to GB/s.
Every NVML failure becomes a `reason` string; no GPU or driver is a normal state. Whether GPM worked is
also said in a word (`gpm_status`), so a caller can tell a GPU without it from a user NVML refused.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import psutil

from tui.core.hardware.devices import UnknownDeviceError, find_device
from tui.core.telemetry.readings import GpuReading, GpuSample
from tui.sources.host import ListenerFinder
from tui.sources.nvml_errors import gpm_status, init_reason, nvml_reason

GPM_MIN_WINDOW_S = 0.1
"""nvml.h: GPM samples less than 100 ms apart read as zero."""

PRESET_TOLERANCE = 0.10
"""A preset's published bandwidth replaces the clock × bus figure only within this share of it.

Names match forgivingly (an A100 PCIe 40GB would find the 80GB preset); a figure that far off
is another part, so the clock figure stands."""


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


@dataclass
class _Leaf:
    """What stays fixed for one leaf device, plus its GPM ping-pong samples."""

    index: str
    handle: Any
    name: str
    uuid: str | None
    parent: Any = None
    """The physical GPU's handle for a MIG device (clocks and GPM sampling go through it)."""
    gpu_instance: int | None = None
    peak_bw_gbs: float | None = None
    peak_bw_source: str | None = None
    peak_bw_clock_gbs: float | None = None
    gpm: bool = False
    gpm_status: str | None = None
    gpm_previous: Any = None
    gpm_current: Any = None
    gpm_previous_t: float | None = None
    notes: list[str] = field(default_factory=list)
    """Fixed reasons (e.g. why there is no GPM), repeated in every reading."""


class GpuSampler:
    """Open NVML once, then `sample()` every interval; `close()` (or `with`) frees GPM samples and shuts NVML down."""

    def __init__(self, server_port: int | None = None, nvml: Any = None) -> None:
        self.server_port = server_port
        """TCP port of a local server whose processes' GPU memory is reported."""
        self._listener = ListenerFinder(server_port) if server_port is not None else None
        self._nvml = nvml
        self._leaves: list[_Leaf] = []
        self._reason: str | None = None
        self._versions: dict[str, str | None] = {}
        self._open = False

    def __enter__(self) -> GpuSampler:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def reason(self) -> str | None:
        """Why there are no devices, once opened."""
        return self._reason

    @property
    def versions(self) -> dict[str, str | None]:
        """Once opened: "driver", "nvml" and "cuda" (the driver's CUDA version) as NVML gives them, None where it
        does not; empty when NVML did not start."""
        return dict(self._versions)

    def open(self) -> None:
        """Initialise NVML and list leaf devices; on failure, `reason` says why and samples are empty."""
        if self._nvml is None:
            try:
                import pynvml
            except ImportError:
                self._reason = "no GPU telemetry: nvidia-ml-py (pynvml) is not installed"
                return
            self._nvml = pynvml
        n = self._nvml
        try:
            n.nvmlInit()
        except n.NVMLError as error:
            self._reason = init_reason(n, error)
            return
        except AttributeError as error:  # a foreign `pynvml` module shadows nvidia-ml-py
            self._reason = f"no GPU telemetry: pynvml is not nvidia-ml-py ({error})"
            return
        self._open = True
        self._versions = self._read_versions()
        try:
            count = n.nvmlDeviceGetCount()
        except n.NVMLError as error:
            self._reason = f"NVML cannot count devices: {nvml_reason(error)}"
            return
        for i in range(count):
            try:
                self._leaves.extend(self._leaves_of(i))
            except n.NVMLError as error:
                self._reason = f"GPU {i}: {nvml_reason(error)}"
        if not self._leaves and self._reason is None:
            self._reason = "NVML sees no GPU"
        for leaf in self._leaves:
            self._start_gpm(leaf)

    def close(self) -> None:
        if not self._open:
            return
        n = self._nvml
        for leaf in self._leaves:
            for sample in (leaf.gpm_previous, leaf.gpm_current):
                if sample is not None:
                    self._try(n.nvmlGpmSampleFree, sample)
        self._leaves.clear()
        self._try(n.nvmlShutdown)
        self._open = False

    def sample(self) -> GpuSample:
        """Every leaf device now; GPM figures cover the time since the previous call."""
        server_pids = self._server_pids() if self._leaves else None
        devices = tuple(self._read(leaf, server_pids) for leaf in self._leaves)
        return GpuSample(t_unix=time.time(), devices=devices, reason=self._reason)

    # ---- discovery

    def _read_versions(self) -> dict[str, str | None]:
        n = self._nvml
        driver, _ = self._try(n.nvmlSystemGetDriverVersion)
        nvml, _ = self._try(n.nvmlSystemGetNVMLVersion)
        cuda, _ = self._try(n.nvmlSystemGetCudaDriverVersion)  # 13000 is CUDA 13.0
        return {
            "driver": _text(driver) if driver else None,
            "nvml": _text(nvml) if nvml else None,
            "cuda": f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) and cuda > 0 else None,
        }

    def _leaves_of(self, i: int) -> list[_Leaf]:
        n = self._nvml
        handle = n.nvmlDeviceGetHandleByIndex(i)
        name = _text(n.nvmlDeviceGetName(handle))
        uuid, _ = self._try(n.nvmlDeviceGetUUID, handle)
        peak, source, clock_peak, peak_note = self._peak(handle, name)
        mode, _ = self._try(n.nvmlDeviceGetMigMode, handle)
        if not mode or mode[0] != n.NVML_DEVICE_MIG_ENABLE:
            leaf = _Leaf(str(i), handle, name, _text(uuid) if uuid else None, peak_bw_gbs=peak, peak_bw_source=source,
                         peak_bw_clock_gbs=clock_peak)
            if peak_note:
                leaf.notes.append(peak_note)
            return [leaf]
        leaves = []
        slots, _ = self._try(n.nvmlDeviceGetMaxMigDeviceCount, handle)
        for k in range(slots or 0):
            mig, err = self._try(n.nvmlDeviceGetMigDeviceHandleByIndex, handle, k)
            if err:
                continue  # an empty slot
            mig_name, _ = self._try(n.nvmlDeviceGetName, mig)
            mig_uuid, _ = self._try(n.nvmlDeviceGetUUID, mig)
            gpu_instance, _ = self._try(n.nvmlDeviceGetGpuInstanceId, mig)
            leaf = _Leaf(f"{i}/{k}", mig, _text(mig_name) if mig_name else f"{name} MIG {k}",
                         _text(mig_uuid) if mig_uuid else None, parent=handle, gpu_instance=gpu_instance)
            leaf.notes.append("MIG: no GB/s (a GPU instance's share of the peak is not published)")
            leaves.append(leaf)
        return leaves

    def _peak(self, handle: Any, name: str) -> tuple[float | None, str | None, float | None, str | None]:
        """Peak GB/s = max memory clock (MHz) × bus width (bits) × 2 / 8, or the preset's published figure.

        Returns the peak in use, its source, the clock × bus figure and a note when there is no peak."""
        n = self._nvml
        clock, clock_err = self._try(n.nvmlDeviceGetMaxClockInfo, handle, n.NVML_CLOCK_MEM)
        bus, bus_err = self._try(n.nvmlDeviceGetMemoryBusWidth, handle)
        computed = clock * 1e6 * 2 * bus / 8 / 1e9 if clock and bus else None
        try:
            preset: float | None = find_device(name).mem_bandwidth_gbs
        except UnknownDeviceError:
            preset = None
        if preset is not None and (computed is None or abs(preset - computed) <= PRESET_TOLERANCE * computed):
            return preset, "preset", computed, None
        if computed is not None:
            return computed, "clock", computed, None
        return None, None, None, f"no peak bandwidth: {clock_err or bus_err}"

    def _start_gpm(self, leaf: _Leaf) -> None:
        n = self._nvml
        support, error = self._call(n.nvmlGpmQueryDeviceSupport, leaf.handle)
        if error is not None or not support.isSupportedDevice:
            leaf.gpm_status = gpm_status(n, error) if error is not None else "unsupported"
            leaf.notes.append(f"no GPM ({nvml_reason(error)})" if error else "no GPM on this GPU (Hopper or newer has it)")
            return
        previous, error = self._call(n.nvmlGpmSampleAlloc)
        current, error2 = self._call(n.nvmlGpmSampleAlloc) if error is None else (None, None)
        if error is not None or error2 is not None:
            leaf.gpm_status = gpm_status(n, error or error2)
            leaf.notes.append(f"no GPM: {nvml_reason(error or error2)}")
            for sample in (previous, current):
                if sample is not None:
                    self._try(n.nvmlGpmSampleFree, sample)
            return
        leaf.gpm, leaf.gpm_previous, leaf.gpm_current = True, previous, current
        error = self._gpm_take(leaf, leaf.gpm_previous)
        if error is not None:
            self._drop_gpm(leaf, error)
        else:
            leaf.gpm_status = "ok"
            leaf.gpm_previous_t = time.monotonic()

    def _drop_gpm(self, leaf: _Leaf, error: BaseException) -> None:
        leaf.gpm = False
        leaf.gpm_status = gpm_status(self._nvml, error)
        leaf.notes.append(f"GPM failed, memory busy time instead: {nvml_reason(error)}")

    def _gpm_take(self, leaf: _Leaf, sample: Any) -> BaseException | None:
        n = self._nvml
        if leaf.parent is not None:
            return self._call(n.nvmlGpmMigSampleGet, leaf.parent, leaf.gpu_instance, sample)[1]
        return self._call(n.nvmlGpmSampleGet, leaf.handle, sample)[1]

    # ---- sampling

    def _read(self, leaf: _Leaf, server_pids: set[int] | None) -> GpuReading:
        n = self._nvml
        reasons = list(leaf.notes)
        memory, err = self._try(n.nvmlDeviceGetMemoryInfo, leaf.handle)
        if err:
            reasons.append(f"memory: {err}")
        clock, _ = self._try(n.nvmlDeviceGetClockInfo, leaf.parent or leaf.handle, n.NVML_CLOCK_MEM)
        figures: dict[str, Any] = {}
        gpm_status = leaf.gpm_status
        if leaf.gpm:
            figures, gpm_status = self._read_gpm(leaf, reasons)
        if not figures:
            figures = self._read_utilization(leaf, reasons)
        return GpuReading(
            index=leaf.index,
            name=leaf.name,
            uuid=leaf.uuid,
            is_mig=leaf.parent is not None,
            peak_bw_gbs=leaf.peak_bw_gbs,
            peak_bw_source=leaf.peak_bw_source,
            peak_bw_clock_gbs=leaf.peak_bw_clock_gbs,
            gpm_status=gpm_status,
            mem_clock_mhz=float(clock) if clock is not None else None,
            mem_used_bytes=int(memory.used) if memory is not None else None,
            mem_total_bytes=int(memory.total) if memory is not None else None,
            server_mem_bytes=self._server_memory(leaf, server_pids, reasons),
            reason="; ".join(reasons) or None,
            **figures,
        )

    def _read_gpm(self, leaf: _Leaf, reasons: list[str]) -> tuple[dict[str, Any], str]:
        """DRAM bandwidth, SM and tensor activity over the window since the previous GPM sample, and the window's
        `gpm_status` (no figures when it is not "ok")."""
        n = self._nvml
        waited = time.monotonic() - (leaf.gpm_previous_t or 0.0)
        if waited < GPM_MIN_WINDOW_S:
            time.sleep(GPM_MIN_WINDOW_S - waited)
        error = self._gpm_take(leaf, leaf.gpm_current)
        now = time.monotonic()
        if error is not None:
            self._drop_gpm(leaf, error)
            reasons.append(leaf.notes[-1])
            return {}, leaf.gpm_status
        request = n.c_nvmlGpmMetricsGet_t()
        request.version = n.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = 3
        request.sample1, request.sample2 = leaf.gpm_previous, leaf.gpm_current  # sample1 is the older
        request.metrics[0].metricId = n.NVML_GPM_METRIC_DRAM_BW_UTIL
        request.metrics[1].metricId = n.NVML_GPM_METRIC_SM_UTIL
        request.metrics[2].metricId = n.NVML_GPM_METRIC_ANY_TENSOR_UTIL
        _, error = self._call(n.nvmlGpmMetricsGet, request)
        leaf.gpm_previous, leaf.gpm_current, leaf.gpm_previous_t = leaf.gpm_current, leaf.gpm_previous, now
        if error is not None:
            reasons.append(f"GPM metrics: {nvml_reason(error)}")
            return {}, gpm_status(n, error)
        dram, sm, tensor = request.metrics[0], request.metrics[1], request.metrics[2]
        if dram.nvmlReturn != n.NVML_SUCCESS:
            reasons.append(f"GPM DRAM_BW_UTIL returned {dram.nvmlReturn}")
            return {}, gpm_status(n, n.NVMLError(dram.nvmlReturn))
        util = min(1.0, max(0.0, dram.value / 100))
        figures: dict[str, Any] = {
            "mem_bw_util": util,
            "mem_bw_source": "gpm",
            "mem_bw_gbs": util * leaf.peak_bw_gbs if leaf.peak_bw_gbs and leaf.parent is None else None,
        }
        if sm.nvmlReturn == n.NVML_SUCCESS:
            figures.update(sm_util=min(1.0, max(0.0, sm.value / 100)), sm_util_source="gpm")
        else:
            figures.update(self._kernel_busy(leaf, reasons))
        if tensor.nvmlReturn == n.NVML_SUCCESS:
            figures["tensor_util"] = min(1.0, max(0.0, tensor.value / 100))
        else:
            reasons.append(f"GPM ANY_TENSOR_UTIL returned {tensor.nvmlReturn}")
        return figures, "ok"

    def _read_utilization(self, leaf: _Leaf, reasons: list[str]) -> dict[str, Any]:
        """NVML's busy-time percentages: memory busy is a duty cycle, so no GB/s from it."""
        utilization, err = self._try(self._nvml.nvmlDeviceGetUtilizationRates, leaf.handle)
        if err:
            reasons.append(f"utilization: {err}")
            return {}
        return {
            "mem_bw_util": utilization.memory / 100,
            "mem_bw_source": "utilization",
            "sm_util": utilization.gpu / 100,
            "sm_util_source": "utilization",
        }

    def _kernel_busy(self, leaf: _Leaf, reasons: list[str]) -> dict[str, Any]:
        utilization, err = self._try(self._nvml.nvmlDeviceGetUtilizationRates, leaf.handle)
        if err:
            reasons.append(f"utilization: {err}")
            return {}
        return {"sm_util": utilization.gpu / 100, "sm_util_source": "utilization"}

    def _server_pids(self) -> set[int] | None:
        if self.server_port is None:
            return None
        root, _ = self._listener.find()
        return {root.pid} if root is not None else set()

    def _server_memory(self, leaf: _Leaf, server_pids: set[int] | None, reasons: list[str]) -> int | None:
        """GPU memory of processes that are the server or below it (vLLM's EngineCore holds it, not the API process)."""
        if not server_pids:
            return None
        processes, err = self._try(self._nvml.nvmlDeviceGetComputeRunningProcesses, leaf.handle)
        if err:
            reasons.append(f"processes: {err}")
            return None
        return sum(p.usedGpuMemory or 0 for p in processes if _descends_from(p.pid, server_pids))

    def _call(self, fn: Any, *args: Any) -> tuple[Any, BaseException | None]:
        """Call NVML; (value, None) or (None, the NVMLError, or AttributeError where the binding lacks the function)."""
        try:
            return fn(*args), None
        except (self._nvml.NVMLError, AttributeError) as error:
            return None, error

    def _try(self, fn: Any, *args: Any) -> tuple[Any, str | None]:
        """Call NVML; (value, None) or (None, reason)."""
        value, error = self._call(fn, *args)
        return value, None if error is None else nvml_reason(error)


def _descends_from(pid: int, roots: set[int]) -> bool:
    """pid is a root or has one among its parents (NVML pids from another PID namespace do not resolve)."""
    if pid in roots:
        return True
    try:
        return any(parent.pid in roots for parent in psutil.Process(pid).parents())
    except psutil.Error:
        return False
