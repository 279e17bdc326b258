"""GPU and host: memory bandwidth against peak, SM use, memory; host CPU/RAM and the server process."""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Static

from tui.app.widgets.text import set_text
from tui.core.telemetry import GpuReading, GpuSample, HostSample, MetricsSnapshot

GIB = 1024**3


class GpuPane(Static):
    """Plain text, rebuilt on every sample; it never reads NVML itself."""

    can_focus = True
    """Tab reaches the pane and scrolls it into view: on an 80×24 terminal over SSH there is no mouse."""

    # repaint=False: set_text repaints the pane when its text changes, and most samples change none of it.
    gpu: reactive[GpuSample | None] = reactive(None, always_update=True, repaint=False)
    """The latest NVML sample."""
    host: reactive[HostSample | None] = reactive(None, always_update=True, repaint=False)
    """The latest psutil sample."""
    cpu_ceiling: reactive[str | None] = reactive(None, repaint=False)
    """How the decode ceiling of a server phasetop did not start was derived (its GPU, or the CPU row), or why it has none."""
    metrics: reactive[MetricsSnapshot | None] = reactive(None, always_update=True, repaint=False)
    """The latest /metrics snapshot: for vLLM's own estimate of the bytes it reads, beside NVML's measurement."""
    server_exit: reactive[str | None] = reactive(None, repaint=False)
    """How the simulator phasetop started ended, while it is not running again; shown in place of its process."""

    def __init__(self, **kwargs) -> None:
        super().__init__("waiting for the first sample…", markup=False, **kwargs)

    def _refresh_text(self) -> None:
        lines = gpu_lines(self.gpu) + estimate_lines(self.metrics) + host_lines(self.host, self.cpu_ceiling, self.server_exit)
        set_text(self, "\n".join(lines))
        self.set_class(self.server_exit is not None, "-server-exited")

    watch_gpu = watch_host = watch_cpu_ceiling = watch_metrics = watch_server_exit = _refresh_text


def gpu_lines(sample: GpuSample | None) -> list[str]:
    if sample is None:
        return ["GPU: sampling…"]
    if not sample.devices:
        return [f"no GPU: {sample.reason or 'none found'}"]
    return [line for device in sample.devices for line in _device_lines(device)]


def _device_lines(d: GpuReading) -> list[str]:
    lines = [f"GPU {d.index} {d.name}"]
    if d.mem_bw_source == "gpm" and d.mem_bw_gbs is not None:
        peak = f" of {d.peak_bw_gbs:,.0f}" if d.peak_bw_gbs else ""
        lines.append(f"  memory bandwidth {d.mem_bw_gbs:,.0f}{peak} GB/s ({d.mem_bw_util:.0%} of peak)")
    elif d.mem_bw_source == "utilization" and d.mem_bw_util is not None:
        lines.append(f"  memory busy {d.mem_bw_util:.0%} of the time (no GPM: busy time, not bandwidth)")
    else:
        lines.append("  memory bandwidth: not available")
    if d.sm_util is not None:
        lines.append(f"  SM {d.sm_util:.0%}")
    if d.mem_used_bytes is not None and d.mem_total_bytes:
        server = f", server {d.server_mem_bytes / GIB:.1f} GiB" if d.server_mem_bytes else ""
        lines.append(f"  memory {d.mem_used_bytes / GIB:.1f} / {d.mem_total_bytes / GIB:.1f} GiB{server}")
    if d.reason:
        lines.append(f"  ({d.reason})")
    return lines


def estimate_lines(snapshot: MetricsSnapshot | None) -> list[str]:
    """vLLM's model-based read rate (`--enable-mfu-metrics`), apart from the measured GB/s above it: an estimate."""
    if snapshot is None or snapshot.est_read_gbs is None:
        return []
    gbs = snapshot.est_read_gbs
    shown = f"{gbs:,.1f}" if gbs < 100 else f"{gbs:,.0f}"
    return [f"  vLLM estimate: {shown} GB/s read per GPU (from the model's shape, not measured)"]


def host_lines(sample: HostSample | None, cpu_ceiling: str | None, server_exit: str | None = None) -> list[str]:
    """The host's CPU and RAM, then the server process (or how the simulator phasetop started ended)."""
    if sample is None:
        return [exit_line(server_exit)] if server_exit else []
    lines = [
        f"host CPU {sample.cpu_percent:.0f}% of {sample.cpu_count} cores · "
        f"RAM {sample.ram_used_bytes / GIB:.1f} / {sample.ram_total_bytes / GIB:.1f} GiB"
    ]
    if server_exit:
        lines.append(exit_line(server_exit))
    elif sample.process:
        p = sample.process
        lines.append(f"server process {p.name} (pid {p.pid}): CPU {p.cpu_percent:.0f}% · RSS {p.rss_bytes / GIB:.2f} GiB")
    if cpu_ceiling:
        lines.append(cpu_ceiling)
    return lines


def exit_line(server_exit: str) -> str:
    return f"server process: the simulator exited ({server_exit}); press R to start it again"
