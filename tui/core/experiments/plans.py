"""The domain text's experiments: their plans and their rows (the table each one shows: `tui.core.experiments.columns`).

Pure: the drivers in `tui.sources.workloads.experiments` time the requests; this module turns timings into
rows (one per value swept); `tui.core.experiments.findings` turns rows into the one-line finding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from tui.core.measure.records import RequestTiming
from tui.core.runs.run_record import draw_block_of, request_figures, request_samples
from tui.core.measure.stats import summarize
from tui.core.measure.together import together_decode_tok_s
from tui.core.measure.uncertainty import BLOCK_GAPS, NOT_ENOUGH, by_block, interval, worst_verdict

EXPERIMENT_NAMES = {"prompt-tokens": "prompt-length sweep", "prefix": "prefix cache", "concurrency": "concurrency sweep",
                    "interference": "long-prompt interference", "context": "context growth",
                    "disaggregation": "disaggregation", "speculation": "speculative decoding"}
"""What each experiment is called where a person reads of it (toasts, the flag editor's reruns)."""

EXPERIMENTS = ("prompt-tokens", "prefix", "concurrency", "interference", "context", "disaggregation", "speculation")
"""What `--vary` names, in the order the domain text tells them."""
OWN_SIMULATORS = ("disaggregation", "speculation")
"""Experiments that start phasetop's simulator in each of their server setups rather than run against one server
(`tui.sources.workloads.disaggregation`, `tui.sources.workloads.speculation`)."""

MAX_VALUES = 32
MAX_REPEAT = 50
MAX_STREAMS = 256
"""make_client pools 256 connections: one per stream."""

BACKGROUND_PROMPT_TOKENS = 200
"""Prompt length of each stream in the concurrency and interference experiments."""
INTERFERENCE_STREAMS = 8
"""Streams decoding when the long prompt lands."""
INTERFERENCE_LEAD_TOKENS = 32
"""Tokens every running stream has before the long prompt is sent: the "before" ITL."""
PREFIX_TAIL_WORDS = 16
"""A unique question after the shared prefix, so no two requests are the same prompt."""
PREFIX_TAIL_TOKENS = 48
"""What the tail may cost: its words at up to 2 tokens each (a coarse tokenizer's rate), and its nonce's 14 characters."""
CONTEXT_PROMPT_TOKENS = 32
"""The context experiment starts from a short prompt: the context grows by generation."""
CONTEXT_WINDOW = 256
"""ITL at position p is read over the gaps of the tokens at positions (p − window, p]."""
CONTEXT_FLOOR = CONTEXT_PROMPT_TOKENS + CONTEXT_WINDOW
"""The first position with a whole window of gaps behind it."""
FIT_MARGIN_SHARE = 1 / 32
FIT_MARGIN_MIN_TOKENS = 32
"""Of the server's max_model_len, this share (at least this many tokens) is kept free: a prompt fitted by the
server's tokenizer may come out a few tokens off, one estimated without it off by a share of its length."""


@dataclass(frozen=True, slots=True)
class Plan:
    """One experiment to run: what varies, over which values, tokens generated per request, repeats per value."""

    vary: str
    values: tuple[int, ...]
    """Prompt tokens, prefix tokens, streams, long-prompt tokens, or token positions (context)."""
    max_tokens: int
    """Tokens each request generates; for context, the generation's length (to the largest position)."""
    repeat: int = 1
    scaled: tuple[str, ...] = ()
    """What was scaled down to fit the server's max_model_len, one note each ("prefix tokens 4,000 → 3,900 …")."""
    slos: tuple[float | None, float | None] = (None, None)
    """Disaggregation: the TTFT and worst gap (seconds) its setups are judged by, where given."""

    def to_json(self) -> dict:
        slos = dict(zip(("slo_ttft_s", "slo_itl_s"), self.slos, strict=True)) if any(v is not None for v in self.slos) else {}
        return {"vary": self.vary, "values": list(self.values), "max_tokens": self.max_tokens, "repeat": self.repeat, **slos}

    @property
    def streams(self) -> int:
        """The most requests it has in flight at once."""
        if self.vary in ("concurrency", "speculation"):
            return max(self.values)
        if self.vary in ("interference", "disaggregation"):
            return INTERFERENCE_STREAMS + 1
        return 1


DEFAULT_VALUES = {
    "prompt-tokens": (200, 500, 1000, 2000),
    "prefix": (1000, 2000, 4000),
    "concurrency": (1, 2, 4, 8, 16, 32),
    "interference": (4000,),
    "context": (1000, 2000, 4000, 8000),
    "disaggregation": (4000,),
    "speculation": (1, 8, 32, 128),
}
DEFAULT_MAX_TOKENS = {"prompt-tokens": 64, "prefix": 8, "concurrency": 256, "interference": 256, "disaggregation": 256,
                      "speculation": 128}
DEFAULT_REPEAT = {"prompt-tokens": 3, "prefix": 3, "concurrency": 1, "interference": 1, "context": 1, "disaggregation": 1,
                  "speculation": 2}
MIN_MAX_TOKENS = {"prompt-tokens": 2, "prefix": 1, "concurrency": 2, "interference": 2 * INTERFERENCE_LEAD_TOKENS,
                  "disaggregation": 2 * INTERFERENCE_LEAD_TOKENS, "speculation": 2}


def make_plan(
    vary: str,
    values: Sequence[int] | None = None,
    max_tokens: int | None = None,
    repeat: int | None = None,
    max_model_len: int | None = None,
) -> Plan:
    """The plan with defaults filled in, values sorted; ValueError (one line) for input that cannot run.

    With the server's `max_model_len` known, every request must fit it less a margin (`fit_margin`):
    defaults that do not fit are scaled down, and say so in `Plan.scaled`; values or max-tokens the
    caller gave that do not fit are refused, so nothing is sent that the server would reject.
    """
    if vary not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {vary!r}: choose one of {', '.join(EXPERIMENTS)}")
    chosen = tuple(sorted(set(values))) if values is not None else DEFAULT_VALUES[vary]
    if not chosen:
        raise ValueError("give at least one value")
    if len(chosen) > MAX_VALUES:
        raise ValueError(f"at most {MAX_VALUES} values")
    if chosen[0] < 1:
        raise ValueError(f"values must be at least 1, got {chosen[0]}")
    repeat = DEFAULT_REPEAT[vary] if repeat is None else repeat
    if not 1 <= repeat <= MAX_REPEAT:
        raise ValueError(f"repeat must be 1 to {MAX_REPEAT}, got {repeat}")
    if vary == "context" and max_tokens is not None:
        raise ValueError("max-tokens does not apply to context: the generation runs to the largest value")
    if vary == "context" and chosen[0] < CONTEXT_FLOOR:
        raise ValueError(f"context positions must be at least {CONTEXT_FLOOR} (a {CONTEXT_PROMPT_TOKENS}-token prompt, then a {CONTEXT_WINDOW}-token window)")
    tokens = None if vary == "context" else DEFAULT_MAX_TOKENS[vary] if max_tokens is None else max_tokens
    if tokens is not None and tokens < MIN_MAX_TOKENS[vary]:
        raise ValueError(f"max-tokens must be at least {MIN_MAX_TOKENS[vary]} for {vary}, got {tokens}")
    if vary in ("concurrency", "speculation") and chosen[-1] > MAX_STREAMS:
        raise ValueError(f"at most {MAX_STREAMS} streams, got {chosen[-1]}")
    scaled: list[str] = []
    if max_model_len is not None:
        fits = f"to fit max_model_len {max_model_len:,} ({fit_margin(max_model_len):,} tokens kept free)"
        budget = max_model_len - fit_margin(max_model_len)
        if vary in ("concurrency", "interference", "disaggregation", "speculation"):
            tokens = _fit_stream_tokens(vary, tokens, max_tokens is not None, budget, fits, scaled)
        chosen = _fit_values(vary, chosen, tokens, values is not None, budget, fits, scaled)
    if vary == "context":
        tokens = chosen[-1] - CONTEXT_PROMPT_TOKENS + 1
    return Plan(vary, chosen, tokens, repeat, tuple(scaled))


def fit_margin(max_model_len: int) -> int:
    """Tokens of the server's context length a plan leaves free (see FIT_MARGIN_SHARE)."""
    return max(FIT_MARGIN_MIN_TOKENS, math.ceil(max_model_len * FIT_MARGIN_SHARE))


VALUE_LABELS = {"prompt-tokens": "prompt tokens", "prefix": "prefix tokens", "interference": "long prompt tokens",
                "context": "positions", "disaggregation": "long prompt tokens"}
"""What a value is, for the notes; concurrency's values are streams, which no context length limits."""


def _fit_stream_tokens(vary: str, max_tokens: int, given: bool, budget: int, fits: str, scaled: list[str]) -> int:
    """Max-tokens of the running streams (a short prompt each), scaled down when the default does not fit."""
    room = budget - BACKGROUND_PROMPT_TOKENS
    if max_tokens <= room:
        return max_tokens
    if given or room < MIN_MAX_TOKENS[vary]:
        floor = f", and {vary} needs at least {MIN_MAX_TOKENS[vary]}" if room < MIN_MAX_TOKENS[vary] else ""
        raise ValueError(f"max-tokens {max_tokens:,} cannot fit after a {BACKGROUND_PROMPT_TOKENS}-token prompt: "
                         f"at most {max(room, 0):,} {fits}{floor}")
    scaled.append(f"max-tokens {max_tokens:,} → {room:,} {fits}")
    return room


def _fit_values(vary: str, values: tuple[int, ...], max_tokens: int | None, given: bool, budget: int, fits: str,
                scaled: list[str]) -> tuple[int, ...]:
    """The values whose longest request fits `budget`: defaults above it come down to it, given ones are refused."""
    if vary not in VALUE_LABELS:
        return values
    if vary == "prompt-tokens":
        largest = budget - max_tokens
    elif vary == "prefix":
        largest = budget - PREFIX_TAIL_TOKENS - max_tokens
    else:  # interference, disaggregation: the long prompt asks for one token; context: p takes p − prompt + 1 tokens
        largest = budget - 1
    over = [v for v in values if v > largest]
    if not over:
        return values
    label, least = VALUE_LABELS[vary], CONTEXT_FLOOR if vary == "context" else 1
    top = _two_figures(largest) if largest > 0 else 0
    if given or top < least:
        extra = f" with max-tokens {max_tokens:,}" if vary in ("prompt-tokens", "prefix") else ""
        floor = f", and {vary} needs at least {least:,}" if top < least else ""
        raise ValueError(f"{label} {_listed(over)} cannot fit: at most {max(largest, 0):,}{extra} {fits}{floor}")
    scaled.append(f"{label} {_listed(over)} → {top:,} {fits}")
    return tuple(sorted({min(v, top) for v in values}))


def _two_figures(n: int) -> int:
    """`n` rounded down to two significant figures (3,967 → 3,900): a fitted value that reads as a plain number."""
    step = 10 ** max(len(str(n)) - 2, 0)
    return n - n % step


def _listed(values: Sequence[int]) -> str:
    return ", ".join(f"{v:,}" for v in values)


def _ok(timings: Sequence[RequestTiming]) -> list[RequestTiming]:
    """The requests a row is built from: finished, and timed as generation (not flagged `burst`: delivery)."""
    return [t for t in timings if t.ok and not t.burst]


def _bursts(timings) -> int:
    """How many finished requests a row leaves out because they were timed in bursts."""
    return sum(1 for t in timings if t.ok and t.burst)


def _p50(values) -> float | None:
    return summarize(values).p50


def _request_intervals(timings: Sequence[RequestTiming], row: dict, figures: dict[str, tuple[str, str]]) -> dict:
    """`{key: interval}` for the row's figures that are a statistic of these requests (key: (request figure, stat)),
    each over the requests' draws (`tui.core.runs.run_record.request_samples`: requests sent together are one)."""
    requests = [t.to_json() for t in timings]
    block_s = draw_block_of(request_figures(requests))
    return {key: interval(request_samples(requests, name, block_s), stat, row[key]).to_json()
            for key, (name, stat) in figures.items()}


def _rounds_interval(values: Sequence[float | None], value: float | None) -> dict:
    """A median over rounds' interval, each round a draw."""
    return interval([(v,) for v in values if v is not None], "p50", value).to_json()


# Rows: one per value; JSON-ready dicts with the unit in each key, and "intervals": {key: tui.core.measure.uncertainty.Interval}.


def prompt_length_row(prompt_tokens: int, timings: Sequence[RequestTiming]) -> dict:
    """TTFT and decode rate (medians over the repeats) for one prompt length."""
    done = _ok(timings)
    row = {
        "prompt_tokens": prompt_tokens,
        "ttft_s": _p50(t.ttft_s for t in done),
        "decode_tok_s": _p50(t.decode_tok_s for t in done),
        "prefill_tok_s": _p50(t.prefill_tok_s for t in done),
        "itl_p50_s": _p50(gap for t in done for gap in t.itl_s),
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
) -> dict:
    """TTFT of a unique prompt, and of one shared prefix sent the first and the second time (medians)."""
    first_ttft = _p50(t.ttft_s for t in _ok(first))
    second_ttft = _p50(t.ttft_s for t in _ok(second))
    cached = [t.server_split.cached_tokens for t in _ok(second) if t.server_split and t.server_split.cached_tokens is not None]
    row = {
        "prefix_tokens": prefix_tokens,
        "unique_ttft_s": _p50(t.ttft_s for t in _ok(unique)),
        "first_ttft_s": first_ttft,
        "second_ttft_s": second_ttft,
        "second_vs_first": second_ttft / first_ttft if first_ttft and second_ttft is not None else None,
        "cached_tokens": _p50(cached),
        "n": len(_ok(second)),
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
    done = [t for t in timings if t.ok and t.e2e_s is not None and t.output_tokens]
    if not done:
        return None
    start = min(t.t_sent_unix for t in done)
    end = max(t.t_sent_unix + t.e2e_s for t in done)
    return sum(t.output_tokens for t in done) / (end - start) if end > start else None


def concurrency_row(streams: int, rounds: Sequence[Sequence[RequestTiming]]) -> dict:
    """Aggregate tok/s (median over rounds) and ITL percentiles (every gap of every stream) at one stream count."""
    done = [t for batch in rounds for t in _ok(batch)]
    itl = summarize(gap for t in done for gap in t.itl_s)
    ttft = summarize(t.ttft_s for t in done)
    aggregates = [aggregate_tok_s(batch) for batch in rounds]
    row = {
        "streams": streams,
        "aggregate_tok_s": _p50(aggregates),
        "per_stream_tok_s": _p50(t.decode_tok_s for t in done),
        "batch_decode_tok_s": _p50(together_decode_tok_s(batch) for batch in rounds),
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


def interference_row(prompt_tokens: int, rounds: Sequence[tuple[Sequence[RequestTiming], RequestTiming]]) -> dict:
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
    windows = []
    for background, intruder in rounds:
        gaps, sent, first = interference_gaps(_ok(background), intruder)
        block_s = draw_block_of(request_figures([t.to_json() for t in background]))
        for phase, values in phases.items():
            timed = [(g.end_s, g.gap_s) for g in gaps if g.phase == phase]
            values.extend(gap for _, gap in timed)
            draws[phase].extend(by_block(timed, block_s))
        during = [g.gap_s for g in gaps if g.phase == "during"]
        if during:
            worst.append(max(during))
        windows.append((sent, first, max((g.end_s for g in gaps), default=None), intruder.ttft_s))
    before, during_worst = summarize(phases["before"]).mean, _p50(worst)
    sent, first, end, ttft = windows[0] if windows else (None, None, None, None)
    intervals = {"itl_before_s": interval(draws["before"], "mean", before).to_json(),
                 "itl_after_s": interval(draws["after"], "mean", summarize(phases["after"]).mean).to_json()}
    stalled = (worst_verdict(draws["before"], draws["during"], max(phases["before"]), during_worst, higher_is_better=False)
               if phases["before"] and during_worst is not None else NOT_ENOUGH)
    return {
        "prompt_tokens": prompt_tokens,
        "streams": max((len(b) for b, _ in rounds), default=0),
        "prefill_start_s": sent,
        "prefill_end_s": first,
        "streams_end_s": end,
        "prefill_ttft_s": ttft,
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


def context_rows(positions: Sequence[int], generations: Sequence[RequestTiming], prompt_tokens: int) -> list[dict]:
    """ITL (mean and p50) over the window of gaps ending at each token position, pooled over generations.

    The gap before output token i (0-based, i ≥ 1) is the step that ran at context position
    prompt_tokens + i, so a generation of `position − prompt_tokens + 1` tokens reaches `position`.
    The finding compares means: a mean of consecutive gaps is the window's span over its count, so
    a busy client that reads a few tokens late moves only the window's edges, where it would drag
    the median of single gaps down with every burst. A draw of the mean's interval is `BLOCK_GAPS` consecutive
    steps (a step shared, and the next few).
    """
    rows = []
    generation_steps = [_step_gaps(t) for t in _ok(generations)]
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
