"""The rows of the domain text's experiments: each run's timings turned into the figures its table shows (one row per
value swept, `tui.core.experiments.columns`), with their intervals. Pure: the drivers in
`tui.sources.workloads.experiments` time the requests; `tui.core.experiments.findings` turns rows into the finding.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from tui.core.experiments.plans import CONTEXT_WINDOW
from tui.core.measure.records import RequestTiming
from tui.core.measure.stats import summarize
from tui.core.measure.together import together_decode_tok_s
from tui.core.measure.uncertainty import BLOCK_GAPS, NOT_ENOUGH, by_block, interval, worst_verdict
from tui.core.runs.run_record import draw_block_of, request_figures, request_samples


def finished(timings: Sequence[RequestTiming]) -> list[RequestTiming]:
    """The requests a row is built from: finished, and timed as generation (not flagged `burst`: delivery)."""
    return [t for t in timings if t.ok and not t.burst]


def _bursts(timings: Iterable[RequestTiming]) -> int:
    """How many finished requests a row leaves out because they were timed in bursts."""
    return sum(1 for t in timings if t.ok and t.burst)


def p50_of(values: Iterable[float | None]) -> float | None:
    return summarize(values).p50


def _request_intervals(timings: Sequence[RequestTiming], row: dict[str, Any], figures: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """`{key: interval}` for the row's figures that are a statistic of these requests (key: (request figure, stat)),
    each over the requests' draws (`tui.core.runs.run_record.request_samples`: requests sent together are one)."""
    requests = [t.to_json() for t in timings]
    block_s = draw_block_of(request_figures(requests))
    return {key: interval(request_samples(requests, name, block_s), stat, row[key]).to_json()
            for key, (name, stat) in figures.items()}


def _rounds_interval(values: Sequence[float | None], value: float | None) -> dict[str, Any]:
    """A median over rounds' interval, each round a draw."""
    return interval([(v,) for v in values if v is not None], "p50", value).to_json()


# Rows: one per value; JSON-ready dicts with the unit in each key, and "intervals": {key: tui.core.measure.uncertainty.Interval}.


def prompt_length_row(prompt_tokens: int, timings: Sequence[RequestTiming]) -> dict[str, Any]:
    """TTFT and decode rate (medians over the repeats) for one prompt length."""
    done = finished(timings)
    row = {
        "prompt_tokens": prompt_tokens,
        "ttft_s": p50_of(t.ttft_s for t in done),
        "decode_tok_s": p50_of(t.decode_tok_s for t in done),
        "prefill_tok_s": p50_of(t.prefill_tok_s for t in done),
        "itl_p50_s": p50_of(gap for t in done for gap in t.itl_s),
        "n": len(done),
        "bursts": _bursts(timings),
    }
    return row | {"intervals": _request_intervals(timings, row, {"ttft_s": ("ttft_s", "p50"),
                                                                 "decode_tok_s": ("decode_tok_s", "p50")})}


def prefix_row(
    prefix_tokens: int,
    unique: Sequence[RequestTiming],
    first: Sequence[RequestTiming],
    second: Sequence[RequestTiming],
) -> dict[str, Any]:
    """TTFT of a unique prompt, and of one shared prefix sent the first and the second time (medians)."""
    first_ttft = p50_of(t.ttft_s for t in finished(first))
    second_ttft = p50_of(t.ttft_s for t in finished(second))
    cached = [t.server_split.cached_tokens for t in finished(second) if t.server_split and t.server_split.cached_tokens is not None]
    row = {
        "prefix_tokens": prefix_tokens,
        "unique_ttft_s": p50_of(t.ttft_s for t in finished(unique)),
        "first_ttft_s": first_ttft,
        "second_ttft_s": second_ttft,
        "second_vs_first": second_ttft / first_ttft if first_ttft and second_ttft is not None else None,
        "cached_tokens": p50_of(cached),
        "n": len(finished(second)),
        "bursts": _bursts([*unique, *first, *second]),
    }
    ttft = {"ttft_s": ("ttft_s", "p50")}
    intervals = {key: _request_intervals(timings, {"ttft_s": row[key]}, ttft)["ttft_s"]
                 for key, timings in (("unique_ttft_s", unique), ("first_ttft_s", first), ("second_ttft_s", second))}
    return row | {"intervals": intervals}


def aggregate_tok_s(timings: Sequence[RequestTiming]) -> float | None:
    """Output tokens of all the requests over the span from the first send to the last token.

    Every finished request counts, bursts too: tokens read late only stretch the span, so a client that
    falls behind makes this a lower bound, never an overstatement."""
    done = [(t.t_sent_unix, t.t_sent_unix + t.e2e_s, t.output_tokens) for t in timings
            if t.ok and t.e2e_s is not None and t.output_tokens]
    if not done:
        return None
    start = min(sent for sent, _, _ in done)
    end = max(last for _, last, _ in done)
    return sum(tokens for _, _, tokens in done) / (end - start) if end > start else None


def concurrency_row(streams: int, rounds: Sequence[Sequence[RequestTiming]]) -> dict[str, Any]:
    """Aggregate tok/s (median over rounds) and ITL percentiles (every gap of every stream) at one stream count."""
    done = [t for batch in rounds for t in finished(batch)]
    itl = summarize(gap for t in done for gap in t.itl_s)
    ttft = summarize(t.ttft_s for t in done)
    aggregates = [aggregate_tok_s(batch) for batch in rounds]
    row = {
        "streams": streams,
        "aggregate_tok_s": p50_of(aggregates),
        "per_stream_tok_s": p50_of(t.decode_tok_s for t in done),
        "batch_decode_tok_s": p50_of(together_decode_tok_s(batch) for batch in rounds),
        "context_tokens": _mean_context(done),
        "itl_p50_s": itl.p50,
        "itl_p99_s": itl.p99,
        "ttft_p50_s": ttft.p50,
        "ttft_p99_s": ttft.p99,
        "n": len(done),
        "bursts": _bursts([t for batch in rounds for t in batch]),
    }
    intervals = _request_intervals([t for batch in rounds for t in batch], row, {
        "itl_p50_s": ("itl_s", "p50"), "itl_p99_s": ("itl_s", "p99"), "ttft_p50_s": ("ttft_s", "p50")})
    return row | {"intervals": {"aggregate_tok_s": _rounds_interval(aggregates, row["aggregate_tok_s"]), **intervals}}


def _mean_context(streams: Sequence[RequestTiming]) -> float | None:
    """The context a stream attends to while it decodes, on average: its prompt and half its answer."""
    contexts = [t.prompt_tokens + t.output_tokens / 2 for t in streams if t.prompt_tokens and t.output_tokens]
    return sum(contexts) / len(contexts) if contexts else None


@dataclass(frozen=True, slots=True)
class Gap:
    """One inter-token gap of a running stream, on an axis whose zero is the first stream's send."""

    stream: int
    start_s: float
    end_s: float
    phase: str
    """"before", "during" or "after" the long prompt's prefill (sent → its first token)."""

    @property
    def gap_s(self) -> float:
        return self.end_s - self.start_s


def interference_gaps(background: Sequence[RequestTiming], intruder: RequestTiming) -> tuple[list[Gap], float, float | None]:
    """Every gap of the running streams, placed before, during or after the long prefill.

    Returns the gaps and the prefill window (sent, first token) on the same axis; the window's end
    is None when the long prompt produced no token.
    """
    origin = min(t.t_sent_unix for t in (*background, intruder))
    sent = intruder.t_sent_unix - origin
    first = sent + intruder.ttft_s if intruder.ttft_s is not None else None
    gaps = []
    for index, timing in enumerate(background):
        base = timing.t_sent_unix - origin
        for a, b in pairwise(timing.token_offsets_s):
            start, end = base + a, base + b
            if end <= sent:
                phase = "before"
            elif first is not None and start >= first:
                phase = "after"
            else:
                phase = "during"
            gaps.append(Gap(index, start, end, phase))
    return gaps, sent, first


def interference_row(prompt_tokens: int, rounds: Sequence[tuple[Sequence[RequestTiming], RequestTiming]]) -> dict[str, Any]:
    """The running streams' ITL before (mean), during (worst gap) and after (mean) the long prefill.

    Means, as in `context_rows`, so tokens read in bursts by a busy client do not fake a short ITL.
    Over several rounds: before and after pool every gap, during is the median round's worst gap.
    The times are the first round's, in seconds from its first stream's send, so a timeline can
    draw before (0 → prefill start), during (→ prefill end) and after (→ streams end). `stall`'s verdict: "worse"
    when the worst gap during the prefill is surely above every one before it (`worst_verdict`, over stretches of
    gaps as draws: one round's stall is one draw, so it takes a few rounds to be sure).
    """
    phases: dict[str, list[float]] = {"before": [], "during": [], "after": []}
    draws: dict[str, list[tuple[float, ...]]] = {"before": [], "during": [], "after": []}
    worst: list[float] = []
    windows: list[tuple[float | None, float | None, float | None, float | None]] = []
    for background, intruder in rounds:
        gaps, sent, first = interference_gaps(finished(background), intruder)
        block_s = draw_block_of(request_figures([t.to_json() for t in background]))
        for phase, values in phases.items():
            timed = [(g.end_s, g.gap_s) for g in gaps if g.phase == phase]
            values.extend(gap for _, gap in timed)
            draws[phase].extend(by_block(timed, block_s))
        during = [g.gap_s for g in gaps if g.phase == "during"]
        if during:
            worst.append(max(during))
        windows.append((sent, first, max((g.end_s for g in gaps), default=None), intruder.ttft_s))
    before, during_worst = summarize(phases["before"]).mean, p50_of(worst)
    prefill_start, prefill_end, streams_end, prefill_ttft = windows[0] if windows else (None, None, None, None)
    intervals = {"itl_before_s": interval(draws["before"], "mean", before).to_json(),
                 "itl_after_s": interval(draws["after"], "mean", summarize(phases["after"]).mean).to_json()}
    stalled = (worst_verdict(draws["before"], draws["during"], max(phases["before"]), during_worst, higher_is_better=False)
               if phases["before"] and during_worst is not None else NOT_ENOUGH)
    return {
        "prompt_tokens": prompt_tokens,
        "streams": max((len(b) for b, _ in rounds), default=0),
        "prefill_start_s": prefill_start,
        "prefill_end_s": prefill_end,
        "streams_end_s": streams_end,
        "prefill_ttft_s": prefill_ttft,
        "itl_before_s": before,
        "itl_during_s": during_worst,
        "itl_during_rounds_s": worst,
        "itl_after_s": summarize(phases["after"]).mean,
        "spike": during_worst / before if before and during_worst is not None else None,
        "gaps_during": len(phases["during"]),
        "n": len(rounds),
        "bursts": _bursts([t for background, _ in rounds for t in background]),
        "intervals": intervals,
        "stall": {"verdict": stalled, "n_before": len(draws["before"]), "n_during": len(draws["during"])},
    }


def context_rows(positions: Sequence[int], generations: Sequence[RequestTiming], prompt_tokens: int) -> list[dict[str, Any]]:
    """ITL (mean and p50) over the window of gaps ending at each token position, pooled over generations.

    The gap before output token i (0-based, i ≥ 1) is the step that ran at context position
    prompt_tokens + i, so a generation of `position − prompt_tokens + 1` tokens reaches `position`.
    The finding compares means: a mean of consecutive gaps is the window's span over its count, so
    a busy client that reads a few tokens late moves only the window's edges, where it would drag
    the median of single gaps down with every burst. A draw of the mean's interval is `BLOCK_GAPS` consecutive
    steps (a step shared, and the next few).
    """
    rows = []
    generation_steps = [_step_gaps(t) for t in finished(generations)]
    for position in positions:
        lo, hi = position - CONTEXT_WINDOW - prompt_tokens + 1, position - prompt_tokens
        windows = [[gap for i, gap in steps if lo <= i <= hi] for steps in generation_steps]
        summary = summarize(gap for window in windows for gap in window)
        draws = [tuple(window[k:k + BLOCK_GAPS]) for window in windows for k in range(0, len(window), BLOCK_GAPS)]
        rows.append({"position": position, "itl_p50_s": summary.p50, "itl_mean_s": summary.mean, "n": summary.n,
                     "bursts": _bursts(generations),
                     "intervals": {"itl_mean_s": interval(draws, "mean", summary.mean).to_json()}})
    return rows


def _step_gaps(timing: RequestTiming) -> list[tuple[int, float]]:
    """(output-token index, gap before it) for each decode step of one generation.

    A chunk that carried k tokens comes k tokens after the last: its gap is shared evenly over those k steps, so
    positions stay token positions, not chunk counts. Where the chunks' tokens are not known, chunk i is token i.
    """
    positions = timing.token_ends or range(len(timing.token_offsets_s))
    steps = []
    for (start, a), (end, b) in pairwise(zip(positions, timing.token_offsets_s, strict=True)):
        steps += [(i, (b - a) / (end - start)) for i in range(start + 1, end + 1)]
    return steps
