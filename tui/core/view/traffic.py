"""The traffic view's arithmetic: every request a server served (its trace span, `tui.core.telemetry.served`) as a lane of its
phases on one clock, what made the slowest slow, phasetop's own sends beside the server's account of them, each
phase's percentiles beside the server's histograms, and a window as a run.

A span gives each request's arrival, queue, prefill and decode, so a lane is drawn from them alone:

    arrival ─ outside the engine ─ queued ─ queue ─ scheduled ─ prefill ─ first token ─ decode ─ last token

"outside the engine" is what vLLM's TTFT holds before the engine queued the request (its API server: the HTTP
request read, the prompt tokenized); the simulator has none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from math import ceil, floor
from statistics import median
from typing import Any

from tui.core.fleet.text import seconds
from tui.core.measure.records import RequestTiming
from tui.core.measure.stats import summarize
from tui.core.runs.run_record import new_run
from tui.core.telemetry.readings import HistogramQuantiles
from tui.core.telemetry.served import ServedRequest, ServerSpan, Tally, TraceWindow, senders, sent_id, served_summary
from tui.core.untrusted import one_line
from tui.core.view.timeline import ALIGNED, WALL_CLOCK

OUTSIDE, QUEUE, PREFILL, DECODE, EMPTY = "outside", "queue", "prefill", "decode", "empty"
PAINT_ORDER = (OUTSIDE, QUEUE, DECODE, PREFILL)
"""Later phases are painted over earlier ones where they share a cell: prefill last, so a prefill of a few ms in a
lane of seconds still shows."""
EDGE = 1e-6
"""Of a cell: a phase that ends on a cell's edge, give or take a float's rounding, does not spill into the next."""
LONG_PROMPT = 2.0
"""A prompt this many times the window's median length is named as the reason its prefill was slow."""
SLOW_PREFILL = 0.5
"""A prefill rate under this share of the window's median is named as slowed by the steps it shared."""


def take_traces(window: TraceWindow, records: Iterable[ServedRequest], server_spans: Iterable[ServerSpan],
                received: Tally) -> None:
    """Keep what the receiver passed on; its counts are the window's, but for what the window itself pushed out."""
    window.add(records, server_spans)
    window.tally = replace(received, evicted=window.tally.evicted)


def phase_spans(record: ServedRequest) -> tuple[tuple[str, float, float], ...]:
    """(phase, start, end), seconds after the request's arrival: the engine's queue and prefill end at the first
    token (`ttft_s`), decode runs from it; what TTFT holds before the queue is outside the engine."""
    prefill_start = max(0.0, record.ttft_s - record.prefill_s)
    queue_start = max(0.0, prefill_start - record.queue_s)
    return ((OUTSIDE, 0.0, queue_start), (QUEUE, queue_start, prefill_start), (PREFILL, prefill_start, record.ttft_s),
            (DECODE, record.ttft_s, record.ttft_s + record.decode_s))


@dataclass(frozen=True, slots=True)
class TrafficLane:
    record: ServedRequest
    cells: tuple[str, ...]
    """One phase name (or EMPTY) per column."""


@dataclass(frozen=True, slots=True)
class TrafficLayout:
    """The lanes drawn, oldest arrival first, on `view`'s clock: from `t0_unix` over `span_s` on the wall clock, or
    each from its own arrival over `span_s` when aligned (`t0_unix` None)."""

    view: str
    lanes: tuple[TrafficLane, ...]
    t0_unix: float | None
    span_s: float
    hidden: int
    """Served requests in the window that are older than the lanes drawn (the rows ran out)."""


def traffic_layout(records: Sequence[ServedRequest], width: int, rows: int, view: str = WALL_CLOCK) -> TrafficLayout:
    """The newest `rows` requests by arrival, each `width` cells."""
    drawn = sorted(records, key=lambda r: r.start_unix)[-rows:] if rows > 0 else []
    hidden = len(records) - len(drawn)
    if not drawn or width <= 0:
        return TrafficLayout(view, (), None, 0.0, hidden)
    ends = [r.ttft_s + r.decode_s for r in drawn]
    if view == ALIGNED:
        span = max(max(ends), 1e-3)
        lanes = tuple(TrafficLane(r, _cells(phase_spans(r), 0.0, span, width)) for r in drawn)
        return TrafficLayout(view, lanes, None, span, hidden)
    t0 = min(r.start_unix for r in drawn)
    span = max(max(r.start_unix + end for r, end in zip(drawn, ends)) - t0, 1e-3)
    lanes = tuple(TrafficLane(r, _cells(phase_spans(r), r.start_unix - t0, span, width)) for r in drawn)
    return TrafficLayout(view, lanes, t0, span, hidden)


def _cells(spans: Iterable[tuple[str, float, float]], offset_s: float, span_s: float, width: int) -> tuple[str, ...]:
    """Each phase over the columns its time covers, at least one column for a phase that took any time."""
    cells = [EMPTY] * width
    per_cell = span_s / width
    by_phase = {phase: (start, end) for phase, start, end in spans}
    for phase in PAINT_ORDER:
        start, end = by_phase[phase]
        if end <= start:
            continue
        first = min(width - 1, max(0, floor((offset_s + start) / per_cell + EDGE)))
        last = min(width, max(first + 1, ceil((offset_s + end) / per_cell - EDGE)))
        cells[first:last] = [phase] * (last - first)
    return tuple(cells)


def hidden_line(hidden: int) -> str:
    """The lanes' note when older requests did not fit: they are still in every figure, only not drawn."""
    noun = "request" if hidden == 1 else "requests"
    return f"↑ {hidden:,} older {noun} not drawn (no room); every figure below counts them"


def served_text(records: Sequence[ServedRequest]) -> str:
    """How many requests the window holds and the time they cover, first arrival to last answer (one request: its
    own arrival to its answer): the window every span figure is over."""
    if not records:
        return "no request served yet"
    if len(records) == 1:
        return f"1 request served over {seconds(covered_s(records))}, arrival to answer"
    return f"{len(records):,} requests served over {seconds(covered_s(records))}, first arrival to last answer"


def covered_s(records: Sequence[ServedRequest]) -> float:
    """Seconds from the first arrival to the last answer (the sender's clock: only differences are taken)."""
    return max(r.end_unix for r in records) - min(r.start_unix for r in records)


def slowest_lines(records: Sequence[ServedRequest], count: int = 5) -> list[str]:
    """The `count` slowest to their first token, each with the phase that made it slow, as one line."""
    if not records:
        return []
    median_prompt = median(r.prompt_tokens for r in records)
    rates = [r.prompt_tokens / r.prefill_s for r in records if r.prefill_s > 0]
    median_rate = median(rates) if rates else None
    slowest = sorted(records, key=lambda r: r.ttft_s, reverse=True)[:count]
    return [f"{request_name(r)}: {why_slow(r, median_prompt, median_rate)}" for r in slowest]


def why_slow(record: ServedRequest, median_prompt: float, median_rate: float | None) -> str:
    """The part of TTFT that made it long, in words: queue (capacity), prefill (a long prompt, or one whose steps
    were shared), or the time outside the engine."""
    outside = max(0.0, record.ttft_s - record.queue_s - record.prefill_s)
    part, spent = max((("queue", record.queue_s), ("prefill", record.prefill_s), ("outside", outside)),
                      key=lambda item: item[1])
    of = f"of TTFT {seconds(record.ttft_s)}"
    if part == "queue":
        return f"queue {seconds(spent)} {of}: capacity (it waited for a place in the batch or the KV cache)"
    if part == "outside":
        return f"{seconds(spent)} {of} outside the engine: the API server (reading the request, tokenizing the prompt)"
    prompt = f"{record.prompt_tokens:,}-token prompt"
    rate = record.prompt_tokens / record.prefill_s if record.prefill_s > 0 else None
    if record.prompt_tokens >= LONG_PROMPT * median_prompt or rate is None or median_rate is None:
        return f"prefill {seconds(spent)} {of}: {prompt}"
    if rate < SLOW_PREFILL * median_rate:
        return (f"prefill {seconds(spent)} {of}: {prompt} at {rate:,.0f} tok/s, under half the window's "
                f"{median_rate:,.0f}: its steps were shared (other prompts' chunks, the batch's decode)")
    return f"prefill {seconds(spent)} {of}: {prompt}"


def request_name(record: ServedRequest) -> str:
    """Its id (untrusted: one safe line, cut), marked when phasetop sent it."""
    name = short_id(record, 28)
    return f"{name} (yours)" if record.sent_by_phasetop else name


def short_id(record: ServedRequest, width: int) -> str:
    """The request's id as one safe line of at most `width` characters (its start kept: `cmpl-883d…`)."""
    text = one_line(record.request_id or "(no id)")
    return text if len(text) <= width else text[:max(0, width - 1)] + "…"


def client_of(record: ServedRequest, by_completion_id: Mapping[str, RequestTiming]) -> RequestTiming | None:
    """phasetop's own timing of the request, found by the completion id its span names."""
    found = sent_id(record.request_id, by_completion_id.keys())
    return by_completion_id[found] if found is not None else None


def own_beside_server(records: Sequence[ServedRequest], timings: Iterable[RequestTiming]) -> list[tuple[ServedRequest, RequestTiming]]:
    """phasetop's sends that the server's spans account for, each beside its span."""
    by_id = {t.completion_id: t for t in timings if t.completion_id and t.ok and t.ttft_s is not None}
    pairs = [(r, client_of(r, by_id)) for r in records]
    return [(r, t) for r, t in pairs if t is not None]


def own_line(records: Sequence[ServedRequest], pairs: Sequence[tuple[ServedRequest, RequestTiming]]) -> str:
    """How many of the requests served were phasetop's, and what the client's TTFT holds over the server's."""
    if not pairs:
        return f"yours: none of the {len(records):,} served (phasetop's sends are matched by their completion id)"
    overs = [t.ttft_s - r.ttft_s for r, t in pairs if t.ttft_s is not None]
    yours = f"yours: {len(pairs):,} of {len(records):,} served"
    if not overs:
        return f"{yours} · none with a first token on the client's side"
    return (f"{yours} · client TTFT − server TTFT (the network and the client): p50 {seconds(summarize(overs).p50)}, "
            f"max {seconds(max(overs))}")


PHASE_ROWS = (("queue_s", "queue", "queue_s"), ("prefill_s", "prefill", "prefill_s"), ("decode_s", "decode", "decode_s"),
              ("ttft_s", "TTFT", "ttft_s"), ("e2e_s", "E2E", "e2e_s"), ("unaccounted_s", "outside the engine", None))
"""(the record's figure, its label, the /metrics histogram it sits beside)."""


def phase_table(records: Sequence[ServedRequest], histograms: Mapping[str, HistogramQuantiles]) -> list[tuple[str, ...]]:
    """One row per phase: its label, p50/p90/p99 over the window's spans (exact, per request), and the server's
    /metrics histogram's over its window (bucket-interpolated: a bound says ≤ or ≥)."""
    rows = []
    for field_name, label, histogram in PHASE_ROWS:
        exact = summarize(getattr(r, field_name) for r in records)
        quantiles = histograms.get(histogram) if histogram else None
        metrics = (tuple(_bounded(quantiles, q) for q in ("p50", "p90", "p99")) if quantiles is not None
                   else ("–", "–", "–"))
        rows.append((label, seconds(exact.p50), seconds(exact.p90), seconds(exact.p99), f"{exact.n:,}", *metrics))
    return rows


def windows_line(records: Sequence[ServedRequest], histograms: Mapping[str, HistogramQuantiles],
                 metrics_window_s: float | None) -> str:
    """What each side of the phase table is over, short enough for one row at 80 columns: the spans' columns over
    the window's requests, the /metrics ones over the server's histograms in the scraper's own window (None: its
    length is not known here)."""
    spans = f"{len(records):,} request{'s' * (len(records) != 1)}, {seconds(covered_s(records))}" if records else "none yet"
    return f"spans: {spans} · /metrics: {metrics_window_text(histograms, metrics_window_s)}"


def metrics_window_text(histograms: Mapping[str, HistogramQuantiles], window_s: float | None) -> str:
    """The /metrics columns' window in words, and why they read "–" when they do."""
    if not histograms:
        return "not read yet"
    shown = [histograms[name] for _, _, name in PHASE_ROWS if name is not None and name in histograms]
    if not shown:
        return "none of these histograms"
    window = f"its last {floor(window_s):,} s" if window_s is not None else "its scrape window"
    requests = max(q.n for q in shown)
    if not requests:
        return f"no request in {window}"
    return f"{window}, {requests:,.0f} request{'s' * (requests != 1)}"


def _bounded(quantiles: HistogramQuantiles, name: str) -> str:
    edge = quantiles.edges.get(name)
    if edge == "first" and quantiles.first_le is not None:
        return f"≤ {seconds(quantiles.first_le)}"
    if edge == "last" and quantiles.last_le is not None:
        return f"≥ {seconds(quantiles.last_le)}"
    return seconds(getattr(quantiles, name))


def run_requests(records: Iterable[ServedRequest]) -> list[dict[str, Any]]:
    """The records as a run's requests: the figures any run compares on (TTFT, TPOT, decode and prefill rates, E2E),
    arrival as the send time (the interval's draws are blocks of it), and the span's own phases beside."""
    out: list[dict[str, Any]] = []
    for r in records:
        steps = r.completion_tokens - 1
        out.append({
            "ok": True, "t_sent_unix": r.start_unix, "ttft_s": r.ttft_s, "e2e_s": r.e2e_s,
            "tpot_s": r.decode_s / steps if steps > 0 else None,
            "decode_tok_s": steps / r.decode_s if steps > 0 and r.decode_s > 0 else None,
            "prefill_tok_s": r.prompt_tokens / r.prefill_s if r.prefill_s > 0 else None,
            "prompt_tokens": r.prompt_tokens, "output_tokens": r.completion_tokens, "itl_s": [],
            "queue_s": r.queue_s, "prefill_s": r.prefill_s, "decode_s": r.decode_s, "request_id": r.request_id,
            "service": r.service, "host": r.host, "sent_by_phasetop": r.sent_by_phasetop,
        })
    return out


def traffic_run(records: Sequence[ServedRequest], source: str, endpoint: str | None) -> dict[str, Any]:
    """The window as a run of kind "traffic", from its first arrival to its last answer; `source` says who kept it
    ("phasetop traces", "ui traffic view"). The server is who sent the spans (service@host, untrusted text)."""
    started = datetime.fromtimestamp(min(r.start_unix for r in records), UTC)
    finished = datetime.fromtimestamp(max(r.end_unix for r in records), UTC)
    return new_run("traffic", {"source": source}, {"senders": senders(records), "otlp_endpoint": endpoint},
                   run_requests(records), served_summary(records), started, finished)
