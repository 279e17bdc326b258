"""GPU and host: memory bandwidth against peak, SM use, memory; host CPU/RAM and the server process; where
GPM measures GB/s and the pane has room, a chart of it over the last minutes against the peak."""

from __future__ import annotations

import math

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from tui.app.widgets.history_plot import HistoryPlot, Line
from tui.app.widgets.text import set_text
from tui.core.telemetry.metric_history import GpuHistory
from tui.core.telemetry.readings import GpuReading, GpuSample, HostSample, MetricsSnapshot

GIB = 1024**3
CHART_MIN_COLUMNS = 40
"""Content columns for the bandwidth chart: fewer, and its minute ticks crowd out."""


class GpuPane(Vertical):
    """Text lines rebuilt on every sample, and the bandwidth chart under them; it never reads NVML itself."""

    DEFAULT_CSS = """
    GpuPane {
        height: auto;
    }
    """

    can_focus = True
    """Tab reaches the pane and scrolls it into view: on an 80×24 terminal over SSH there is no mouse."""

    # repaint=False: set_text repaints the text when it changes, and most samples change none of it.
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
        super().__init__(**kwargs)
        self.history = GpuHistory()
        """Each GPU's measured GB/s over the last minutes."""

    def compose(self) -> ComposeResult:
        yield Static("waiting for the first sample…", id="gpu-text", markup=False)
        yield HistoryPlot(id="gpu-chart")

    @property
    def text(self) -> str:
        """The pane's lines as shown."""
        return str(self.query_one("#gpu-text", Static).render())

    def watch_gpu(self, sample: GpuSample | None) -> None:
        if sample is not None:
            self.history.add(sample)
        self._refresh_text()

    def on_resize(self) -> None:
        self._show_chart()

    def _refresh_text(self) -> None:
        lines = gpu_lines(self.gpu) + estimate_lines(self.metrics) + host_lines(self.host, self.cpu_ceiling, self.server_exit)
        set_text(self.query_one("#gpu-text", Static), "\n".join(lines))
        self.set_class(self.server_exit is not None, "-server-exited")
        self._show_chart()

    watch_host = watch_cpu_ceiling = watch_metrics = watch_server_exit = _refresh_text

    def _show_chart(self) -> None:
        """The chart where a device has GB/s and it fits under the text: the pane grows by the chart's rows
        (its CSS height) up to the most rows its CSS allows (half the column beside the prompt)."""
        devices = self.history.devices
        chart = self.query_one("#gpu-chart", HistoryPlot)
        width = self.content_size.width
        room = self._room() - _rows(self.text, width)
        fits = bool(devices) and width >= CHART_MIN_COLUMNS and room >= chart.styles.height.value
        self.set_class(fits, "-charted")
        colours = (HistoryPlot.FIRST, HistoryPlot.SECOND)
        chart.show([Line(d.gbs, colours[i % 2]) for i, d in enumerate(devices)], self.history.newest_t,
                   sorted({d.peak_gbs for d in devices if d.peak_gbs and d.peak_gbs > 0}))

    def _room(self) -> int:
        """Content rows the pane may take: its max-height against the column it is in, less border and padding."""
        column = self.parent.content_size if isinstance(self.parent, Widget) else self.app.size
        limit = self.styles.max_height
        rows = limit.resolve(column, self.app.size) if limit is not None else column.height
        return int(rows) - self.styles.gutter.height


def _rows(text: str, width: int) -> int:
    """Rows `text` takes wrapped at `width` columns."""
    return sum(max(1, math.ceil(len(line) / width)) for line in text.splitlines()) if width else 0


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
    return f"server process: {server_exit}; press R to start it again"
