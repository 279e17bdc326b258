"""The server's metrics and the GPUs' bandwidth over the last minutes: bounded time series for the charts.

A point holds a finite number or None, a gap (no requests in the window, not reported, NaN or ±Inf sent):
a chart draws each run of numbers as one line and leaves the gaps blank, never a NaN as a value.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from tui.core.telemetry.readings import GpuSample, HistogramQuantiles, MetricsSnapshot

SPAN_S = 300.0
"""Five minutes: the charts' x axis, and how long a point is kept."""
MAX_POINTS = 1024
"""Points kept per series, whatever the scrape interval: more than a chart's width in braille dots."""

METRICS = ("ttft_p50_s", "ttft_p99_s", "itl_p50_s", "itl_p99_s", "running", "waiting", "kv_cache_usage")
"""The charted metrics of a scrape, by name."""

Run = tuple[list[float], list[float]]
"""One unbroken line: x (seconds before the newest point, ≤ 0) and the values."""


def finite(value: float | None) -> float | None:
    """The value, or None where it is not a finite number."""
    return value if value is not None and math.isfinite(value) else None


class Series:
    """One metric's (t_unix, value) points, oldest first, none more than `span_s` before the newest."""

    def __init__(self, span_s: float = SPAN_S, max_points: int = MAX_POINTS) -> None:
        self.span_s = span_s
        self._points: deque[tuple[float, float | None]] = deque(maxlen=max_points)

    def add(self, t_unix: float, value: float | None) -> None:
        """Append a point and drop those it leaves out of the span. A clock stepped back drops the points
        after the new one, so the series stays in time order; a point with no finite time is ignored."""
        if not math.isfinite(t_unix):
            return
        while self._points and self._points[-1][0] > t_unix:
            self._points.pop()
        self._points.append((t_unix, finite(value)))
        while self._points[0][0] < t_unix - self.span_s:
            self._points.popleft()

    @property
    def points(self) -> list[tuple[float, float | None]]:
        return list(self._points)

    @property
    def oldest_t(self) -> float | None:
        return self._points[0][0] if self._points else None

    @property
    def newest_t(self) -> float | None:
        return self._points[-1][0] if self._points else None

    def has_numbers(self) -> bool:
        return any(value is not None for _, value in self._points)

    def latest(self, count: int) -> list[float | None]:
        """The last `count` values (fewer while it fills), oldest first: a sparkline's samples."""
        return [value for _, value in list(self._points)[-count:]]

    def runs(self, now_unix: float, scale: float = 1.0) -> list[Run]:
        """The numbers as unbroken runs, x in seconds before `now_unix` and values times `scale`."""
        out: list[Run] = []
        current: Run | None = None
        for t, value in self._points:
            if value is None:
                current = None
                continue
            if current is None:
                current = ([], [])
                out.append(current)
            current[0].append(t - now_unix)
            current[1].append(value * scale)
        return out


def _quantile(quantiles: HistogramQuantiles | None, name: str) -> float | None:
    return getattr(quantiles, name) if quantiles is not None and quantiles.n else None


def metric_values(snapshot: MetricsSnapshot) -> dict[str, float | None]:
    """A scrape's value of each charted metric (`METRICS`); None where it has none."""
    ttft, itl = snapshot.histograms.get("ttft_s"), snapshot.histograms.get("itl_s")
    return {
        "ttft_p50_s": _quantile(ttft, "p50"),
        "ttft_p99_s": _quantile(ttft, "p99"),
        "itl_p50_s": _quantile(itl, "p50"),
        "itl_p99_s": _quantile(itl, "p99"),
        "running": snapshot.running,
        "waiting": snapshot.waiting,
        "kv_cache_usage": snapshot.kv_cache_usage,
    }


class MetricHistory:
    """The charted metrics of each scrape over the last `span_s`, one `Series` per name in `METRICS`."""

    def __init__(self, span_s: float = SPAN_S) -> None:
        self.span_s = span_s
        self.series = {name: Series(span_s) for name in METRICS}

    def add(self, snapshot: MetricsSnapshot) -> None:
        for name, value in metric_values(snapshot).items():
            self.series[name].add(snapshot.t_unix, value)

    @property
    def newest_t(self) -> float | None:
        return self.series[METRICS[0]].newest_t


@dataclass(frozen=True, slots=True)
class DeviceBandwidth:
    """One GPU's measured GB/s over the last minutes, and its peak as of the latest sample."""

    index: str
    name: str
    gbs: Series
    peak_gbs: float | None


class GpuHistory:
    """Each GPU's GB/s over the last `span_s`, by index. Only GPM's figure is bandwidth: a device reporting
    memory-busy time (or nothing) has gaps, and one missing from a sample has a gap there."""

    def __init__(self, span_s: float = SPAN_S) -> None:
        self.span_s = span_s
        self._devices: dict[str, DeviceBandwidth] = {}
        self.newest_t: float | None = None

    def add(self, sample: GpuSample) -> None:
        if not math.isfinite(sample.t_unix):
            return
        self.newest_t = sample.t_unix
        seen = set()
        for d in sample.devices:
            seen.add(d.index)
            old = self._devices.get(d.index)
            series = old.gbs if old is not None else Series(self.span_s)
            series.add(sample.t_unix, d.mem_bw_gbs if d.mem_bw_source == "gpm" else None)
            self._devices[d.index] = DeviceBandwidth(d.index, d.name, series, finite(d.peak_bw_gbs))
        for index, device in list(self._devices.items()):
            if index not in seen:
                device.gbs.add(sample.t_unix, None)
            if not device.gbs.has_numbers():  # nothing left to draw: gone, or never measured
                del self._devices[index]

    @property
    def devices(self) -> list[DeviceBandwidth]:
        """The devices with a measured GB/s in the span, in the order first seen."""
        return list(self._devices.values())
