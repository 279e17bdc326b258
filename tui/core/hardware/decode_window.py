"""A stretch of a server's /metrics readings in which it only decoded, and one batch throughout.

Between two readings with the same prompt-token count no sequence joined (a join is a prefill, and its prompt
is counted); with the same running count none left either. The server's own counters over such a stretch give
decode's rate, tokens per step and, where it estimates them, its FLOPs and bytes, free of prefill's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tui.core.telemetry.readings import GpuSample, ServerReading, measured_dram_gbs, serving_devices


@dataclass(frozen=True, slots=True)
class DecodeWindow:
    """The server's counters over a pure-decode stretch."""

    seconds: float
    generated_tokens: float
    batch: float
    """Tokens per step: the iteration-tokens histogram's mean over the stretch, else the running count."""
    batch_source: str
    est_flops: float | None
    """The server's estimated FLOPs over the stretch (per GPU, vLLM's --enable-mfu-metrics); None without them."""
    est_read_bytes: float | None
    generated_before: float
    """The generation counter at the stretch's start (with `generated_tokens`: how far the answers had got)."""
    first: int
    last: int
    """The indices of the readings that open and close it."""

    @property
    def decode_tok_s(self) -> float:
        return self.generated_tokens / self.seconds

    def to_json(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "generated_tokens": self.generated_tokens, "decode_tok_s": self.decode_tok_s,
                "batch": self.batch, "batch_source": self.batch_source}


def decode_window(readings: Sequence[ServerReading]) -> DecodeWindow | None:
    """The longest stretch between two readings in which the server decoded its fullest batch: no prompt counted,
    the running count the same (above 0) at every reading, tokens generated; of such stretches, those with the
    most requests running come first (streams sent together may not all join at once on a busy server, and a
    longer stretch before the last one joined is a smaller batch than the one asked for). It opens one reading
    after the batch was first seen whole: a server counts a step's tokens as it starts and its FLOPs and
    tokens-per-step as it ends (the simulator does), so the reading that first sees the prompts counted may not
    see their step's FLOPs yet. None when there is none (no /metrics, counters that move only when a request
    ends, too few readings)."""
    best: tuple[float, float, int, int] | None = None
    for i in range(1, len(readings)):
        first = readings[i]
        running = first.gauges.get("running")
        prompts = first.counters.get("prompt_tokens_total")
        if not running or prompts is None or "generation_tokens_total" not in first.counters:
            continue
        opened = readings[i - 1]
        if opened.gauges.get("running") != running or opened.counters.get("prompt_tokens_total") != prompts:
            continue  # the batch's prefill step may still be counting (its FLOPs, its tokens per step): one reading on
        for j in range(i + 1, len(readings)):
            later = readings[j]
            if later.gauges.get("running") != running or later.counters.get("prompt_tokens_total") != prompts:
                break
            generated = later.counters.get("generation_tokens_total", 0.0) - first.counters["generation_tokens_total"]
            seconds = later.t_mono - first.t_mono
            if generated > 0 and seconds > 0 and (best is None or (running, seconds) > best[:2]):
                best = (running, seconds, i, j)
    if best is None:
        return None
    _, seconds, i, j = best
    first, last = readings[i], readings[j]
    batch, source = _tokens_per_step(first, last)
    return DecodeWindow(
        seconds=seconds,
        generated_tokens=last.counters["generation_tokens_total"] - first.counters["generation_tokens_total"],
        batch=batch,
        batch_source=source,
        est_flops=_growth(first, last, "est_flops_total"),
        est_read_bytes=_growth(first, last, "est_read_bytes_total"),
        generated_before=first.counters["generation_tokens_total"],
        first=i,
        last=j,
    )


def _tokens_per_step(first: ServerReading, last: ServerReading) -> tuple[float, str]:
    before, after = first.histograms.get("iteration_tokens"), last.histograms.get("iteration_tokens")
    if before is not None and after is not None and after.count > before.count:
        name = last.source_names.get("iteration_tokens", "iteration tokens")
        return (after.sum - before.sum) / (after.count - before.count), f"{name} (mean tokens per step)"
    return first.gauges["running"], f"{first.source_names.get('running', 'running requests')} (running requests)"


def _growth(first: ServerReading, last: ServerReading, counter: str) -> float | None:
    """How much a counter grew over the stretch; None when it is missing or did not move (the flag is off)."""
    before, after = first.counters.get(counter), last.counters.get(counter)
    if before is None or after is None or after <= before:
        return None
    return after - before


def gpm_bytes_per_s(samples: Sequence[GpuSample | None], window: DecodeWindow) -> tuple[float | None, str]:
    """NVML's measured DRAM bandwidth over the window, bytes per second, summed over the GPUs holding the server's
    memory, with where it comes from; None and why where NVML gives no such figure.

    `samples` were taken with the readings, one each: GPM's figures in each cover the time since the one before,
    so those after the window's first reading, to its last, cover the window.
    """
    if not samples:
        return None, "no GPU measurement for this server (a simulator's device is simulated; a remote one is not here)"
    rates = []
    for sample in samples[window.first + 1:window.last + 1]:
        if sample is None or not sample.devices:
            return None, sample.reason if sample is not None and sample.reason else "NVML sees no GPU"
        gbs = measured_dram_gbs(serving_devices(sample.devices))
        if gbs is None:
            return None, "NVML gives no DRAM bandwidth for this GPU (GPM needs Hopper or newer), only busy time"
        rates.append(gbs * 1e9)
    if not rates:
        return None, "no NVML sample inside the decode stretch"
    return sum(rates) / len(rates), "NVML GPM DRAM bandwidth"
