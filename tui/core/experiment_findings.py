"""Each experiment's finding in one line, from its rows, first value against last.

"TTFT ×9.6 from 200 to 2,000 tokens (6.9 → 66 ms); decode −2.1 %": the rows are those of
`tui.core.experiments`, as plain dicts, so a saved run's rows read the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

PREFIX_HIT_RATIO = 0.5
"""A second TTFT below this share of the first reads as a prefix-cache hit."""


def finding(vary: str, rows: Sequence[dict], bursts: int = 0) -> str:
    """The experiment's result in one line, from its rows; `bursts` requests timed as delivery were left out
    of the rows (tui.core.delivery), and the line says so."""
    line = FINDINGS[vary](list(rows))
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


def _disaggregation_finding(rows: list[dict]) -> str:
    """The setup that kept the streams' worst gap lowest and what it cost the long prompt, against one device with
    chunked prefill off; the other two setups' gap and TTFT beside it; split on one device judged."""
    rows = [r for r in rows if r["itl_worst_s"] is not None and r["ttft_s"] is not None]
    longest = max((r["prompt_tokens"] for r in rows), default=None)
    by_key = {r["setup_key"]: r for r in rows if r["prompt_tokens"] == longest}
    base = by_key.get("one-device")
    if base is None or len(by_key) < 2:
        return "not enough setups measured to compare"
    best = min(by_key.values(), key=lambda r: r["itl_worst_s"])
    if best is base:
        return f"{base['setup']} kept the streams' worst gap lowest ({_ms(base['itl_worst_s'])} ms)"
    delta_ms = (best["ttft_s"] - base["ttft_s"]) * 1000
    line = (f"{best['setup']} wins: streams' worst gap {_times(best['itl_worst_s'] / base['itl_worst_s'])} "
            f"({_ms(base['itl_worst_s'])} → {_ms(best['itl_worst_s'])} ms), long-prompt TTFT "
            f"{_signed_ms(delta_ms)} ms")
    if best["kv_transfer_s"] is not None:
        line += f" ({_ms(best['kv_transfer_s'])} ms of it transfer)"
    for key in ("chunked", "1p1d", "split"):
        row = by_key.get(key)
        if row is None or row is best:
            continue
        line += (f"; {row['setup'].removeprefix('one device, ')}: gap {_times(row['itl_worst_s'] / base['itl_worst_s'])}, "
                 f"TTFT {_times(row['ttft_s'] / base['ttft_s'])}")
        if key == "split" and row["ttft_s"] > base["ttft_s"]:
            line += " — not worth it"
    return line


FINDINGS = {
    "prompt-tokens": _prompt_finding,
    "prefix": _prefix_finding,
    "concurrency": _concurrency_finding,
    "interference": _interference_finding,
    "context": _context_finding,
    "disaggregation": _disaggregation_finding,
}


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


def _signed_ms(value_ms: float) -> str:
    return f"{value_ms:+.0f}".replace("-", "−") if abs(value_ms) >= 10 else f"{value_ms:+.1f}".replace("-", "−")


def _percent(value: float) -> str:
    text = f"{value:+.1f} %" if abs(value) < 10 else f"{value:+.0f} %"
    return text.replace("-", "−")
