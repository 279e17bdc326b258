"""The roofline screen's state: where the phases of the requests on the timeline sit under the device's roofs.

Each point comes from requests that ran by themselves, so that what was measured is that phase alone: prefill
from the newest request whose prefill overlapped no other request, decode from the newest streams that decoded
together, with no other request alongside them (their batch is theirs). The server's own estimate is its
counters over the metrics window (all its work, both phases). A point with nothing behind it is a note saying
what would place it, never a figure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tui.core.hardware.roofline import PhasePoint, Roofs, estimated_point
from tui.core.hardware.roofline_phases import decode_from_streams, prefill_model_point
from tui.core.hardware.roofline_target import RooflineTarget, served_target, simulator_target
from tui.core.hardware.roofline_traces import TRACED, Trace, experiment_trace, narrower_decode, narrower_reading
from tui.core.measure.records import RequestTiming
from tui.core.telemetry.readings import GpuReading, MetricsSnapshot, measured_dram_gbs, serving_devices
from tui.core.telemetry.speculation import Speculation

SERVER = "server"
"""The phase of the server's own estimate over the window: its prefills and decodes together."""
NO_PREFILL = "prefill: no request has run alone yet (2 sends a 2,000-token prompt)"
NO_DECODE = "decode: no streams have finished together with nothing else running (1 sends one, 4 eight at once, 5 32)"
TOGETHER_SHARE = 0.8
"""Streams decoded together when each spent this share of its decode while all the others decoded too."""


@dataclass(frozen=True, slots=True)
class LiveRoofline:
    """What the roofline screen draws: the roofs, the points, and a line for each point or why it is missing."""

    target: RooflineTarget | None
    heading: str
    """The device and model the roofs are for, or why there are none."""
    prefill: PhasePoint | None = None
    decode: PhasePoint | None = None
    estimate: PhasePoint | None = None
    """The server's own estimate over the metrics window."""
    lines: tuple[str, ...] = ()
    """Each phase's reading, or what would place it; decode at fewer bits; each sweep's reading; why there is no
    estimate; what NVML measures."""
    estimate_window_s: float | None = None
    ghost: PhasePoint | None = None
    """Decode projected to half the bits (`roofline_traces.narrower_decode`): a projection, drawn as one."""
    traces: tuple[Trace, ...] = ()
    """The last concurrency and prompt-length sweeps on this server, each a line of points."""

    @property
    def roofs(self) -> Roofs | None:
        return self.target.roofs if self.target is not None else None

    @property
    def points(self) -> tuple[PhasePoint, ...]:
        return tuple(p for p in (self.prefill, self.decode, self.estimate) if p is not None)


def live_target(simulator_flags: Mapping[str, str] | None, model_id: str | None,
                devices: Sequence[GpuReading] | None, server_is_local: bool) -> RooflineTarget | str:
    """A simulator's own device and model, else the served model on this host's GPU (as `phasetop roofline`)."""
    if simulator_flags:
        return simulator_target(simulator_flags)
    if devices is None and server_is_local:
        return "waiting for this host's GPUs to be read"
    return served_target(model_id, devices or (), server_is_local)


def live_roofline(target: RooflineTarget | str, timings: Sequence[RequestTiming], metrics: MetricsSnapshot | None,
                  devices: Sequence[GpuReading] | None = None,
                  swept: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> LiveRoofline:
    """The points of the timeline's requests and the server's window, for `target` (or the line saying why none);
    `swept`: the rows of the last sweep of each experiment run on this server, by its `--vary` name."""
    if isinstance(target, str):
        return LiveRoofline(None, f"no roofline: {target}")
    heading = (f"{target.roofs.device} ({target.device_source}) · {target.layout.name} at {target.bits} bit · "
               f"ridge {target.roofs.ridge_flop_per_byte:,.0f} FLOP/byte")
    prefill = _prefill(target, timings)
    decode, decode_why = _decode(target, timings, metrics.speculation if metrics is not None else None)
    ghost = narrower_decode(target, decode)
    estimate, no_estimate = _estimate(target, metrics)
    traces = tuple(trace for vary in TRACED if (rows := (swept or {}).get(vary)) is not None
                   if (trace := experiment_trace(target, vary, rows)) is not None)
    lines = [prefill.reading if prefill else NO_PREFILL, decode.reading if decode else decode_why]
    lines += [narrower_reading(target, decode, ghost)] if ghost and decode else []
    lines += [trace.reading for trace in traces]
    lines += [no_estimate] if no_estimate else []
    lines += [line] if (line := _nvml_line(target, devices)) else []
    return LiveRoofline(target, heading, prefill, decode, estimate, tuple(lines),
                        metrics.window_s if estimate is not None and metrics is not None else None, ghost, traces)


def _span(timing: RequestTiming) -> tuple[float, float]:
    """When a request was on the server, wall clock: from its send to its last token (still running: no end)."""
    if timing.output_tokens is None or not timing.token_offsets_s:
        return timing.t_sent_unix, math.inf
    return timing.t_sent_unix, timing.t_sent_unix + timing.token_offsets_s[-1]


def _overlaps(start: float, end: float, others: Sequence[RequestTiming]) -> bool:
    return any(s < end and start < e for s, e in map(_span, others))


def _prefill(target: RooflineTarget, timings: Sequence[RequestTiming]) -> PhasePoint | None:
    """The newest request whose prefill ran alone (no other request on the server meanwhile)."""
    for index in range(len(timings) - 1, -1, -1):
        timing = timings[index]
        if not timing.ok or timing.ttft_s is None or not timing.prompt_tokens:
            continue
        start = timing.t_sent_unix
        if _overlaps(start, start + timing.ttft_s, [t for i, t in enumerate(timings) if i != index]):
            continue
        split = timing.server_split
        prefill_s = split.prefill_s if split is not None and split.prefill_s else timing.ttft_s
        cached = split.cached_tokens if split is not None and split.cached_tokens else 0
        if cached >= timing.prompt_tokens:
            continue
        return prefill_model_point(target, timing.prompt_tokens, prefill_s, cached)
    return None


def _decode(target: RooflineTarget, timings: Sequence[RequestTiming],
            speculation: Speculation | None) -> tuple[PhasePoint | None, str]:
    """The newest streams that decoded together and alone: each overlapped the others for most of its decode, and
    no request outside them overlapped any of them (their batch is theirs, the same throughout)."""
    placed: set[int] = set()
    for newest in range(len(timings) - 1, -1, -1):
        if newest in placed or timings[newest].output_tokens is None:
            continue
        members = _overlapping(timings, newest)
        placed |= members
        group = [timings[i] for i in sorted(members)]
        if any(t.output_tokens is None for t in group) or not _together(group):
            continue  # one still streaming, or a load's streams, coming and going: no one batch
        point, why = decode_from_streams(target, group, speculation)
        if point is not None:
            return point, ""
        return None, f"decode: the newest streams cannot place it: {why}"
    return None, NO_DECODE


def _overlapping(timings: Sequence[RequestTiming], index: int) -> set[int]:
    """The requests linked to `index` by overlapping on the server, one to the next."""
    group, edge = {index}, [index]
    while edge:
        start, end = _span(timings[edge.pop()])
        for i, other in enumerate(timings):
            if i not in group and _overlaps(start, end, [other]):
                group.add(i)
                edge.append(i)
    return group


def _together(group: Sequence[RequestTiming]) -> bool:
    """Every stream decoded for most of its time while all the others did: one batch, not a load's churn."""
    if not all(t.ok and len(t.token_offsets_s) > 1 for t in group):
        return False
    starts = [t.t_sent_unix + t.token_offsets_s[0] for t in group]
    ends = [t.t_sent_unix + t.token_offsets_s[-1] for t in group]
    shared = min(ends) - max(starts)
    return all(shared >= TOGETHER_SHARE * (end - start) for start, end in zip(starts, ends))


def _estimate(target: RooflineTarget, metrics: MetricsSnapshot | None) -> tuple[PhasePoint | None, str | None]:
    """The server's own FLOPs and bytes over the metrics window (all its work), or why there are none."""
    if metrics is None or not metrics.window_s:
        return None, "server estimate: no /metrics window yet"
    if not metrics.est_flops_per_s or not metrics.est_read_gbs:
        return None, "server estimate: none published (vLLM publishes one with --enable-mfu-metrics)"
    seconds = metrics.window_s
    point = estimated_point(target.roofs, SERVER, metrics.est_flops_per_s * target.gpus * seconds,
                            metrics.est_read_gbs * 1e9 * target.gpus * seconds, seconds)
    return point, None


def _nvml_line(target: RooflineTarget, devices: Sequence[GpuReading] | None) -> str | None:
    """NVML's measured DRAM bandwidth now, against the bandwidth roof, for a server on this host's GPU."""
    if target.device_source != "NVML" or not devices:
        return None
    gbs = measured_dram_gbs(serving_devices(devices))
    if gbs is None:
        return "NVML: no measured DRAM bandwidth on this GPU (GPM needs Hopper or newer), only busy time"
    bytes_per_s = gbs * 1e9
    return (f"NVML measures {bytes_per_s / 1e9:,.0f} GB/s of DRAM traffic now: "
            f"{bytes_per_s / target.roofs.peak_bytes_per_s * 100:.0f} % of the bandwidth roof")


def figures_lines(view: LiveRoofline) -> list[str]:
    """Each point beside the roof above it, a row each: "decode ×8  7.9 FLOP/byte  26.5 of 26.6 TFLOP/s  100 %"."""
    rows = [("prefill", view.prefill, ""), ("decode", view.decode, ""),
            ("server est.", view.estimate,
             f"its own counters over the last {view.estimate_window_s or 0:.0f} s, both phases")]
    lines = [f"{'':<13}{'FLOP/byte':>10}{'TFLOP/s':>10}{'roof':>10}{'share':>8}  bound"]
    for name, point, note in rows:
        if point is None:
            continue
        label = f"{name} ×{point.batch:.3g}" if point.batch is not None and name == "decode" else name
        lines.append(f"{label:<13}{point.intensity_flop_per_byte:>10,.1f}{point.achieved_flops / 1e12:>10,.1f}"
                     f"{point.roof_flops / 1e12:>10,.1f}{point.roof_share * 100:>6.0f} %  {point.bound}"
                     f"{'  · ' + note if note else ''}")
    return lines if len(lines) > 1 else []
