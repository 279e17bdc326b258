"""Each experiment's finding in one line, from its rows, first value against last, with how sure each change is.

"TTFT ×9.6 from 200 to 2,000 tokens (6.9 → 66 ms, sure: [+57.0 … +61.2] ms); decode −2.1 % (tie (±5 %))": the rows
are those of `tui.core.experiments.plans`, as plain dicts, so a saved run's rows read the same way. A change is judged
from the two rows' own intervals (`tui.core.measure.uncertainty.judge_intervals`); `finding_figures` gives the same
judgements for `--json`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tui.core.experiments.speculation import Gain, speculation_finding
from tui.core.measure.uncertainty import (
    BETTER,
    NOT_ENOUGH,
    PRACTICAL,
    TIE,
    WORSE,
    Interval,
    Judged,
    draws_to_rank,
    judge_intervals,
    worst_verdict,
)
from tui.core.runs.compare_text import interval_text, verdict_text

PREFIX_HIT_RATIO = 0.5
"""A second TTFT below this share of the first reads as a prefix-cache hit."""


PROMPT, STREAMS, POSITION = ("prompt_tokens", "{:,} prompt tokens"), ("streams", "{} streams"), ("position", "token {:,}")
"""Where a row's value was measured, and how to say it."""


@dataclass(frozen=True, slots=True)
class Compared:
    """One change a finding names: a figure of one row against another's (or one setup's against another's), judged."""

    figure: str
    """The rows' key ("ttft_s")."""
    label: str
    unit: str
    """"s" or "tok/s"."""
    before_at: str
    after_at: str
    """Where each value was measured ("200 tokens", "one device, chunks of 512")."""
    before: float
    after: float
    judged: Judged

    def to_json(self) -> dict[str, Any]:
        delta = self.after - self.before
        return {"figure": self.figure, "label": self.label, "unit": self.unit, "from": self.before_at,
                "to": self.after_at, "before": self.before, "after": self.after, "delta": delta,
                "delta_pct": 100 * delta / self.before if self.before else None, **self.judged.to_json()}

    def sureness(self) -> str:
        """How sure the change is, in a few words: "sure: [+57.0 … +61.2] ms", "tie (±5 %)", "not enough: n=3, ~12 more"."""
        figure = self.to_json()
        if self.judged.verdict in (BETTER, WORSE):
            return "sure" + (f": {interval_text(figure['ci_low'], figure['ci_high'], self.unit)}" if self.judged.ci else "")
        return verdict_text(figure)


def finding(vary: str, rows: Sequence[dict[str, Any]], bursts: int = 0, slos: tuple[float | None, float | None] = (None, None)) -> str:
    """The experiment's result in one line, from its rows; `bursts` requests timed as delivery were left out
    of the rows (tui.core.measure.delivery), and the line says so. `slos` (TTFT, worst gap, in seconds): what the
    disaggregation experiment judges its setups by, where given."""
    line, _ = _found(vary, rows, slos)
    if bursts:
        line += f" ({bursts} request{'s' if bursts != 1 else ''} timed delivery, not generation, left out)"
    return line


def finding_figures(vary: str, rows: Sequence[dict[str, Any]], slos: tuple[float | None, float | None] = (None, None)) -> list[dict[str, Any]]:
    """Each change the finding names, with its value, interval and verdict (the JSON of a compared figure)."""
    return [compared.to_json() for compared in _found(vary, rows, slos)[1]]


def _found(vary: str, rows: Sequence[dict[str, Any]],
           slos: tuple[float | None, float | None]) -> tuple[str, Sequence[Compared | Gain]]:
    if vary == "speculation":
        return speculation_finding(rows)
    return _disaggregation_finding(list(rows), slos) if vary == "disaggregation" else FINDINGS[vary](list(rows))


def _compared(key: str, label: str, unit: str, a: dict[str, Any], b: dict[str, Any], at: tuple[str, str], higher_is_better: bool) -> Compared:
    """Row a's `key` against row b's, judged from their intervals; `at`: the rows' key that says where each was, and
    how to say it ("{:,} prompt tokens")."""
    judged = judge_intervals(a[key], b[key], Interval.of_row(a, key), Interval.of_row(b, key), higher_is_better)
    where, said = at
    return Compared(key, label, unit, said.format(a[where]), said.format(b[where]), a[key], b[key], judged)


def _prompt_finding(rows: list[dict[str, Any]]) -> tuple[str, list[Compared]]:
    rows = [r for r in rows if r["ttft_s"] is not None]
    if len(rows) < 2:
        return "not enough prompt lengths measured to compare", []
    a, b = rows[0], rows[-1]
    ttft = _compared("ttft_s", "TTFT", "s", a, b, PROMPT, higher_is_better=False)
    line = (f"TTFT {_times(b['ttft_s'] / a['ttft_s'])} from {a['prompt_tokens']:,} to {b['prompt_tokens']:,} tokens "
            f"({_ms(a['ttft_s'])} → {_ms(b['ttft_s'])} ms, {ttft.sureness()})")
    if not (a["decode_tok_s"] and b["decode_tok_s"] is not None):
        return line, [ttft]
    decode = _compared("decode_tok_s", "decode", "tok/s", a, b, PROMPT, higher_is_better=True)
    line += f"; decode {_percent(100 * (b['decode_tok_s'] / a['decode_tok_s'] - 1))} ({decode.sureness()})"
    return line, [ttft, decode]


def _prefix_finding(rows: list[dict[str, Any]]) -> tuple[str, list[Compared]]:
    rows = [r for r in rows if r["second_vs_first"] is not None]
    if not rows:
        return "no shared prefix measured twice", []
    row = rows[-1]
    ratio = row["second_vs_first"]
    judged = judge_intervals(row["first_ttft_s"], row["second_ttft_s"], Interval.of_row(row, "first_ttft_s"),
                             Interval.of_row(row, "second_ttft_s"), higher_is_better=False)
    again = Compared("second_ttft_s", "TTFT sent again", "s", f"{row['prefix_tokens']:,} prefix tokens, first",
                     f"{row['prefix_tokens']:,} prefix tokens, again", row["first_ttft_s"], row["second_ttft_s"], judged)
    verdict = "prefix-cache hit" if ratio < PREFIX_HIT_RATIO else "no prefix-cache hit"
    line = (f"a {row['prefix_tokens']:,}-token prefix sent again: TTFT {_times(ratio)} "
            f"({_ms(row['first_ttft_s'])} → {_ms(row['second_ttft_s'])} ms, {again.sureness()}), {verdict}")
    if row["unique_ttft_s"] is not None:
        line += f"; a unique prompt {_ms(row['unique_ttft_s'])} ms"
    return line, [again]


def _concurrency_finding(rows: list[dict[str, Any]]) -> tuple[str, list[Compared]]:
    rows = [r for r in rows if r["aggregate_tok_s"] and r["itl_p99_s"]]
    if len(rows) < 2:
        return "not enough stream counts measured to compare", []
    a, b = rows[0], rows[-1]
    aggregate = _compared("aggregate_tok_s", "aggregate", "tok/s", a, b, STREAMS, higher_is_better=True)
    tail = _compared("itl_p99_s", "ITL p99", "s", a, b, STREAMS, higher_is_better=False)
    return (f"aggregate {_times(b['aggregate_tok_s'] / a['aggregate_tok_s'])} from {a['streams']} to {b['streams']} streams "
            f"({number(a['aggregate_tok_s'])} → {number(b['aggregate_tok_s'])} tok/s, {aggregate.sureness()}); "
            f"p99 ITL {_times(b['itl_p99_s'] / a['itl_p99_s'])} ({_ms(a['itl_p99_s'])} → {_ms(b['itl_p99_s'])} ms, "
            f"{tail.sureness()})"), [aggregate, tail]


def _interference_finding(rows: list[dict[str, Any]]) -> tuple[str, list[Compared]]:
    rows = [r for r in rows if r["itl_before_s"] is not None]
    if not rows:
        return "no running stream measured before the long prompt landed", []
    row = rows[-1]
    if row["spike"] is None:
        return f"no gap of the running streams overlapped the {row['prompt_tokens']:,}-token prefill", []
    stall = row.get("stall") or {"verdict": NOT_ENOUGH, "n_before": 0, "n_during": 0}
    judged = Judged(None, None, None, stall["verdict"], None, stall["n_before"], stall["n_during"])
    during = Compared("itl_during_s", "worst gap", "s", "before the long prompt", "while it prefilled",
                      row["itl_before_s"], row["itl_during_s"], judged)
    line = (f"running streams' ITL {_times(row['spike'])} while a {row['prompt_tokens']:,}-token prompt prefilled "
            f"({_ms(row['itl_before_s'])} → {_ms(row['itl_during_s'])} ms worst gap, {_stall_sureness(stall, row['n'])})")
    if row["itl_after_s"] is not None:
        line += f", {_ms(row['itl_after_s'])} ms after"
    return line, [during]


def _stall_sureness(stall: dict[str, Any], rounds: int) -> str:
    """Whether the stall is surely above every gap before it: each round's stall is one draw, so one round can only
    hint (its worst gap above every stretch before it is what 1 in that many alike stretches would do)."""
    if stall["verdict"] == WORSE:
        return "sure: above every stretch of gaps before it"
    if stall["verdict"] == TIE:
        return f"tie (±{100 * PRACTICAL:g} %)"
    return f"not sure from {rounds} round{'s' if rounds != 1 else ''}: more rounds (--repeat) would tell"


def _context_finding(rows: list[dict[str, Any]]) -> tuple[str, list[Compared]]:
    rows = [r for r in rows if r["itl_mean_s"]]
    if len(rows) < 2:
        return "not enough token positions measured to compare", []
    a, b = rows[0], rows[-1]
    itl = _compared("itl_mean_s", "ITL mean", "s", a, b, POSITION, higher_is_better=False)
    return (f"ITL {_percent(100 * (b['itl_mean_s'] / a['itl_mean_s'] - 1))} from token {a['position']:,} to {b['position']:,} "
            f"({_ms(a['itl_mean_s'])} → {_ms(b['itl_mean_s'])} ms, {itl.sureness()})"), [itl]


COLOCATED, APART = ("one-device", "chunked"), ("1p1d", "split")
"""The disaggregation experiment's setups: prefill and decode on one device, or served apart."""


def _disaggregation_finding(rows: list[dict[str, Any]], slos: tuple[float | None, float | None] = (None, None)) -> tuple[str, list[Compared]]:
    """Each setup that serves prefill apart judged on both phases against the best colocated setup (the streams'
    worst gap against the lowest colocated one, the long prompt's TTFT against the lowest colocated one): worth it
    only when it is better on one and no worse on the other, or, with SLOs (TTFT, worst gap), when it meets both and
    no colocated setup does. Then whether chunked prefill bought most of the gain at no TTFT cost.

    Each round is one draw of a setup's worst gap and TTFT: with `draws_to_rank` rounds a setup, a call is sure when
    one setup's rounds all lie beyond the other's (`worst_verdict`); with fewer, it is made on ±`PRACTICAL` of the
    medians and the line says it is not sure."""
    rows = [r for r in rows if r["itl_worst_s"] is not None and r["ttft_s"] is not None]
    longest = max((r["prompt_tokens"] for r in rows), default=None)
    by_key = {r["setup_key"]: r for r in rows if r["prompt_tokens"] == longest}
    colocated = [by_key[k] for k in COLOCATED if k in by_key]
    apart = [by_key[k] for k in APART if k in by_key]
    if not colocated or not apart:
        return "not enough setups measured to compare", []
    gap_row, ttft_row = min(colocated, key=lambda r: r["itl_worst_s"]), min(colocated, key=lambda r: r["ttft_s"])
    slo_ttft_s, slo_gap_s = slos
    judged_by_slo = slo_ttft_s is not None and slo_gap_s is not None

    def meets(row: dict[str, Any]) -> bool:
        return judged_by_slo and row["ttft_s"] <= slo_ttft_s and row["itl_worst_s"] <= slo_gap_s

    parts, figures = [], []
    for row in apart:
        gap, ttft = _setup_call(row, gap_row, "itl_worst_s", "worst gap"), _setup_call(row, ttft_row, "ttft_s", "long-prompt TTFT")
        figures += [gap.compared, ttft.compared]
        if judged_by_slo:
            worth = meets(row) and not any(meets(r) for r in colocated)
        else:
            worth = {gap.call, ttft.call} <= {BETTER_CALL, TIE_CALL} and BETTER_CALL in (gap.call, ttft.call)
        transfer = (f", {100 * row['transfer_share']:.0f} % of it the KV transfer"
                    if row["transfer_share"] is not None and row["transfer_share"] >= 0.05 else "")
        part = (f"{row['setup']}: {'worth it' if worth else 'not worth it'} — streams' worst gap "
                f"{_times(row['itl_worst_s'] / gap_row['itl_worst_s'])} of the best colocated "
                f"({_short(gap_row)}: {_ms(gap_row['itl_worst_s'])} → {_ms(row['itl_worst_s'])} ms, {gap.call}), long-prompt TTFT "
                f"{_times(row['ttft_s'] / ttft_row['ttft_s'])} ({_ms(ttft_row['ttft_s'])} → {_ms(row['ttft_s'])} ms{transfer}, {ttft.call})")
        if slo_ttft_s is not None and slo_gap_s is not None:
            part += (f"; {'meets' if meets(row) else 'misses'} the SLOs (TTFT ≤ {_ms(slo_ttft_s)} ms, worst gap ≤ "
                     f"{_ms(slo_gap_s)} ms){', as a colocated setup does' if any(meets(r) for r in colocated) else ''}")
        parts.append(part)
    line = "; ".join(parts)
    base, chunked = by_key.get("one-device"), by_key.get("chunked")
    if base is not None and chunked is not None:
        best_apart = min(apart, key=lambda r: r["itl_worst_s"])
        gained = base["itl_worst_s"] - best_apart["itl_worst_s"]
        if (gained > 0 and base["itl_worst_s"] - chunked["itl_worst_s"] >= 0.5 * gained
                and _setup_call(chunked, base, "ttft_s", "long-prompt TTFT").call != WORSE_CALL):
            line += (f". Chunked prefill buys most of the gain at no TTFT cost: {_short(chunked)} cut the worst gap "
                     f"{_ms(base['itl_worst_s'])} → {_ms(chunked['itl_worst_s'])} ms, TTFT {_times(chunked['ttft_s'] / base['ttft_s'])}")
    fewest = min(len(_rounds(r, "ttft_s")) for r in by_key.values())
    if fewest < draws_to_rank():
        line += (f" ({fewest} round{'s' if fewest != 1 else ''} a setup: called on ±{100 * PRACTICAL:g} % of the medians, "
                 f"not sure; --repeat {draws_to_rank()} would tell)")
    return line, figures


BETTER_CALL, WORSE_CALL, TIE_CALL, UNSURE_CALL = "better", "worse", "no worse", "not sure"
CALLS = {BETTER: BETTER_CALL, WORSE: WORSE_CALL, TIE: TIE_CALL, NOT_ENOUGH: UNSURE_CALL}


@dataclass(frozen=True, slots=True)
class _Call:
    call: str
    compared: Compared


def _setup_call(row: dict[str, Any], reference: dict[str, Any], key: str, label: str) -> _Call:
    """One setup's figure against a reference setup's (lower is better): ranked over their rounds where each has
    `draws_to_rank`, else "better", "worse" or "no worse" on ±`PRACTICAL` of the medians (its verdict, not sure)."""
    ours, theirs = _rounds(row, key), _rounds(reference, key)
    if min(len(ours), len(theirs)) >= draws_to_rank():
        verdict = worst_verdict([(v,) for v in theirs], [(v,) for v in ours], reference[key], row[key], higher_is_better=False)
        call = CALLS[verdict]
    else:
        verdict, call = NOT_ENOUGH, _band_call(row[key], reference[key])
    more = draws_to_rank() - min(len(ours), len(theirs)) if verdict == NOT_ENOUGH and call != UNSURE_CALL else None
    judged = Judged(None, None, None, verdict, more, len(theirs), len(ours))
    return _Call(call, Compared(key, label, "s", reference["setup"], row["setup"], reference[key], row[key], judged))


def _rounds(row: dict[str, Any], key: str) -> list[float]:
    """A setup's value in each round (the median alone, for a row saved before rounds were kept)."""
    kept = (row.get("rounds") or {}).get(key)
    return [v for v in kept if v is not None] if kept else [row[key]]


def _band_call(value: float, reference: float) -> str:
    """Lower is better: "better", "worse", or "no worse" within ±`PRACTICAL` of the reference."""
    if value < reference * (1 - PRACTICAL):
        return BETTER_CALL
    if value > reference * (1 + PRACTICAL):
        return WORSE_CALL
    return TIE_CALL


def _short(row: dict[str, Any]) -> str:
    return str(row["setup"]).removeprefix("one device, ")


FINDINGS = {
    "prompt-tokens": _prompt_finding,
    "prefix": _prefix_finding,
    "concurrency": _concurrency_finding,
    "interference": _interference_finding,
    "context": _context_finding,
}
"""Each experiment's finding from its rows (disaggregation's, which also weighs the SLOs, is `finding`'s own case)."""


def number(value: float) -> str:
    """Three significant figures or so: 1,234 / 56.7 / 8.90."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _ms(seconds: float) -> str:
    return number(seconds * 1000)


def _times(ratio: float) -> str:
    return f"×{ratio:.1f}" if ratio >= 1 else f"×{ratio:.2f}"


def _percent(value: float) -> str:
    text = f"{value:+.1f} %" if abs(value) < 10 else f"{value:+.0f} %"
    return text.replace("-", "−")
