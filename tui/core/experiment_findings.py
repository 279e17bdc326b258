"""Each experiment's finding in one line, from its rows, first value against last.

"TTFT ×9.6 from 200 to 2,000 tokens (6.9 → 66 ms); decode −2.1 %": the rows are those of
`tui.core.experiments`, as plain dicts, so a saved run's rows read the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from tui.core.uncertainty import PRACTICAL

PREFIX_HIT_RATIO = 0.5
"""A second TTFT below this share of the first reads as a prefix-cache hit."""


def finding(vary: str, rows: Sequence[dict], bursts: int = 0, slos: tuple[float | None, float | None] = (None, None)) -> str:
    """The experiment's result in one line, from its rows; `bursts` requests timed as delivery were left out
    of the rows (tui.core.delivery), and the line says so. `slos` (TTFT, worst gap, in seconds): what the
    disaggregation experiment judges its setups by, where given."""
    line = _disaggregation_finding(list(rows), slos) if vary == "disaggregation" else FINDINGS[vary](list(rows))
    if bursts:
        line += f" ({bursts} request{'s' if bursts != 1 else ''} timed delivery, not generation, left out)"
    return line


def _prompt_finding(rows: list[dict]) -> str:
    rows = [r for r in rows if r["ttft_s"] is not None]
    if len(rows) < 2:
        return "not enough prompt lengths measured to compare"
    a, b = rows[0], rows[-1]
    line = (f"TTFT {_times(b['ttft_s'] / a['ttft_s'])} from {a['prompt_tokens']:,} to {b['prompt_tokens']:,} tokens "
            f"({_ms(a['ttft_s'])} → {_ms(b['ttft_s'])} ms)")
    if a["decode_tok_s"] and b["decode_tok_s"] is not None:
        line += f"; decode {_percent(100 * (b['decode_tok_s'] / a['decode_tok_s'] - 1))}"
    return line


def _prefix_finding(rows: list[dict]) -> str:
    rows = [r for r in rows if r["second_vs_first"] is not None]
    if not rows:
        return "no shared prefix measured twice"
    row = rows[-1]
    ratio = row["second_vs_first"]
    verdict = "prefix-cache hit" if ratio < PREFIX_HIT_RATIO else "no prefix-cache hit"
    line = (f"a {row['prefix_tokens']:,}-token prefix sent again: TTFT {_times(ratio)} "
            f"({_ms(row['first_ttft_s'])} → {_ms(row['second_ttft_s'])} ms), {verdict}")
    if row["unique_ttft_s"] is not None:
        line += f"; a unique prompt {_ms(row['unique_ttft_s'])} ms"
    return line


def _concurrency_finding(rows: list[dict]) -> str:
    rows = [r for r in rows if r["aggregate_tok_s"] and r["itl_p99_s"]]
    if len(rows) < 2:
        return "not enough stream counts measured to compare"
    a, b = rows[0], rows[-1]
    return (f"aggregate {_times(b['aggregate_tok_s'] / a['aggregate_tok_s'])} from {a['streams']} to {b['streams']} streams "
            f"({number(a['aggregate_tok_s'])} → {number(b['aggregate_tok_s'])} tok/s); "
            f"p99 ITL {_times(b['itl_p99_s'] / a['itl_p99_s'])} ({_ms(a['itl_p99_s'])} → {_ms(b['itl_p99_s'])} ms)")


def _interference_finding(rows: list[dict]) -> str:
    rows = [r for r in rows if r["itl_before_s"] is not None]
    if not rows:
        return "no running stream measured before the long prompt landed"
    row = rows[-1]
    if row["spike"] is None:
        return f"no gap of the running streams overlapped the {row['prompt_tokens']:,}-token prefill"
    line = (f"running streams' ITL {_times(row['spike'])} while a {row['prompt_tokens']:,}-token prompt prefilled "
            f"({_ms(row['itl_before_s'])} → {_ms(row['itl_during_s'])} ms worst gap)")
    if row["itl_after_s"] is not None:
        line += f", {_ms(row['itl_after_s'])} ms after"
    return line


def _context_finding(rows: list[dict]) -> str:
    rows = [r for r in rows if r["itl_mean_s"]]
    if len(rows) < 2:
        return "not enough token positions measured to compare"
    a, b = rows[0], rows[-1]
    return (f"ITL {_percent(100 * (b['itl_mean_s'] / a['itl_mean_s'] - 1))} from token {a['position']:,} to {b['position']:,} "
            f"({_ms(a['itl_mean_s'])} → {_ms(b['itl_mean_s'])} ms)")


COLOCATED, APART = ("one-device", "chunked"), ("1p1d", "split")
"""The disaggregation experiment's setups: prefill and decode on one device, or served apart."""


def _disaggregation_finding(rows: list[dict], slos: tuple[float | None, float | None] = (None, None)) -> str:
    """Each setup that serves prefill apart judged on both phases against the best colocated setup (the streams'
    worst gap against the lowest colocated one, the long prompt's TTFT against the lowest colocated one): worth it
    only when it is better on one and no worse on the other (±`PRACTICAL`), or, with SLOs (TTFT, worst gap), when it
    meets both and no colocated setup does. Then whether chunked prefill bought most of the gain at no TTFT cost."""
    rows = [r for r in rows if r["itl_worst_s"] is not None and r["ttft_s"] is not None]
    longest = max((r["prompt_tokens"] for r in rows), default=None)
    by_key = {r["setup_key"]: r for r in rows if r["prompt_tokens"] == longest}
    colocated = [by_key[k] for k in COLOCATED if k in by_key]
    apart = [by_key[k] for k in APART if k in by_key]
    if not colocated or not apart:
        return "not enough setups measured to compare"
    gap_row, ttft_row = min(colocated, key=lambda r: r["itl_worst_s"]), min(colocated, key=lambda r: r["ttft_s"])
    slo_ttft_s, slo_gap_s = slos
    judged_by_slo = slo_ttft_s is not None and slo_gap_s is not None

    def meets(row: dict) -> bool:
        return judged_by_slo and row["ttft_s"] <= slo_ttft_s and row["itl_worst_s"] <= slo_gap_s

    parts = []
    for row in apart:
        gap, ttft = _call(row["itl_worst_s"], gap_row["itl_worst_s"]), _call(row["ttft_s"], ttft_row["ttft_s"])
        if judged_by_slo:
            worth = meets(row) and not any(meets(r) for r in colocated)
        else:
            worth = WORSE_CALL not in (gap, ttft) and BETTER_CALL in (gap, ttft)
        transfer = (f", {100 * row['transfer_share']:.0f} % of it the KV transfer"
                    if row["transfer_share"] is not None and row["transfer_share"] >= 0.05 else "")
        part = (f"{row['setup']}: {'worth it' if worth else 'not worth it'} — streams' worst gap "
                f"{_times(row['itl_worst_s'] / gap_row['itl_worst_s'])} of the best colocated "
                f"({_short(gap_row)}: {_ms(gap_row['itl_worst_s'])} → {_ms(row['itl_worst_s'])} ms, {gap}), long-prompt TTFT "
                f"{_times(row['ttft_s'] / ttft_row['ttft_s'])} ({_ms(ttft_row['ttft_s'])} → {_ms(row['ttft_s'])} ms{transfer}, {ttft})")
        if judged_by_slo:
            part += (f"; {'meets' if meets(row) else 'misses'} the SLOs (TTFT ≤ {_ms(slo_ttft_s)} ms, worst gap ≤ "
                     f"{_ms(slo_gap_s)} ms){', as a colocated setup does' if any(meets(r) for r in colocated) else ''}")
        parts.append(part)
    line = "; ".join(parts)
    base, chunked = by_key.get("one-device"), by_key.get("chunked")
    if base is not None and chunked is not None:
        best_apart = min(apart, key=lambda r: r["itl_worst_s"])
        gained = base["itl_worst_s"] - best_apart["itl_worst_s"]
        if (gained > 0 and base["itl_worst_s"] - chunked["itl_worst_s"] >= 0.5 * gained
                and _call(chunked["ttft_s"], base["ttft_s"]) != WORSE_CALL):
            line += (f". Chunked prefill buys most of the gain at no TTFT cost: {_short(chunked)} cut the worst gap "
                     f"{_ms(base['itl_worst_s'])} → {_ms(chunked['itl_worst_s'])} ms, TTFT {_times(chunked['ttft_s'] / base['ttft_s'])}")
    return line


BETTER_CALL, WORSE_CALL, TIE_CALL = "better", "worse", "no worse"


def _call(value: float, reference: float) -> str:
    """Lower is better: "better", "worse", or "no worse" within ±`PRACTICAL` of the reference."""
    if value < reference * (1 - PRACTICAL):
        return BETTER_CALL
    if value > reference * (1 + PRACTICAL):
        return WORSE_CALL
    return TIE_CALL


def _short(row: dict) -> str:
    return row["setup"].removeprefix("one device, ")


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
