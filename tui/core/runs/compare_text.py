"""A comparison of two runs as text: the same figures and config lines in `phasetop compare` and the UI's compare view.

Everything here may come from a server or a run file (keys, flag values, ids): it passes through
`one_line`, so no control character or runaway length reaches a terminal.
"""

from __future__ import annotations

from typing import Any

from tui.core.untrusted import one_line


def started_text(started: object) -> str:
    """"2026-11-29T12:15:00.123Z" shown as "2026-11-29 12:15:00"."""
    return one_line(str(started or "-"), 40).replace("T", " ")[:19]


def changes_lines(title: str, diff: list[dict[str, Any]]) -> list[str]:
    """`title:` then one "  key  before → after" line per changed setting; nothing when nothing changed."""
    if not diff:
        return []
    width = max(len(row["key"]) for row in diff)
    return [f"{title}:"] + [
        f"  {one_line(row['key'], 60):<{width}}  {_setting(row['before'])} → {_setting(row['after'])}" for row in diff
    ]


def workload_line(comparison: dict[str, Any]) -> str | None:
    """"the workloads differ: prompt_tokens 200 → 2000 (…)" where the runs did not run the same thing (another
    kind, other flags, a UI session's other sends)."""
    differs = comparison.get("workload_differs") or []
    if not differs:
        return None
    return (f"the workloads differ: {one_line('; '.join(differs), 300)} (a figure differs for that too, "
            "whatever the server's config)")


def schedule_lines(comparison: dict[str, Any]) -> list[str]:
    """A different arrival seed, said apart from the workload: bench draws one at random each run."""
    return [f"arrival schedule: {one_line(row['key'], 20)} {_setting(row['before'])} → {_setting(row['after'])} "
            "(the same workload, arriving at other moments)" for row in comparison.get("schedule_diff") or ()]


def figure_value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    shown, shown_unit, digits = _scaled(value, unit)
    return f"{shown:,.{digits}f} {shown_unit}"


def figure_delta(delta: float | None, delta_pct: float | None, unit: str) -> str:
    if delta is None:
        return "-"
    shown, shown_unit, digits = _scaled(delta, unit)
    if unit == "share":
        shown_unit = "points"
    percent = f" ({delta_pct:+.1f} %)" if delta_pct is not None else ""
    return f"{shown:+,.{digits}f} {shown_unit}{percent}"


def figure_change(figure: dict[str, Any]) -> str:
    """The change and its interval: "-9.80 ms [-12.10 … -7.60] (-12.3 %)"."""
    unit = figure["unit"]
    change = figure_delta(figure["delta"], None, unit)
    if figure["delta"] is None:
        return change
    if figure.get("ci_low") is not None and figure.get("ci_high") is not None:
        change = f"{change} {interval_text(figure['ci_low'], figure['ci_high'], unit, with_unit=False)}"
    return change + (f" ({figure['delta_pct']:+.1f} %)" if figure.get("delta_pct") is not None else "")


def interval_text(low: float, high: float, unit: str, with_unit: bool = True) -> str:
    """A change's interval, one digit rougher than the change itself: "[-12.1 … -7.6] ms"."""
    (low, shown_unit, digits), (high, _, _) = _scaled(low, unit), _scaled(high, unit)
    digits = max(0, digits - 1)
    return f"[{low:+,.{digits}f} … {high:+,.{digits}f}]" + (f" {shown_unit}" if with_unit else "")


def verdict_text(figure: dict[str, Any]) -> str:
    """What a compared figure's interval allows, in a few words: "better", "tie (±5 %)", "not enough: n=4, ~16 more"."""
    verdict, n = figure.get("verdict"), min(figure.get("n_before") or 0, figure.get("n_after") or 0)
    if figure.get("delta") is None:
        return ""
    if verdict in ("better", "worse"):
        return str(verdict)
    if verdict == "tie":
        return f"tie (±{figure.get('practical_pct', 5):g} %)"
    if figure.get("ci_low") is None and n <= 1 and figure.get("more_requests") is None:
        return "one value a run"
    more = figure.get("more_requests")
    return f"not enough: n={n}" + (f", ~{more:,} more" if more else "")


def verdict_note(level: float, practical_pct: float) -> str:
    """The line under a compare table that says what its verdicts mean."""
    return (f"[low … high]: the change's {100 * level:g} % interval. better/worse: it excludes zero and the change is "
            f"at least {practical_pct:g} %; tie: within ±{practical_pct:g} %. Not enough: n draws, each a stretch of time "
            "(requests close together share the server's steps, so they count once); ~N more: about how many more "
            "requests a side would tell. One value a run (a throughput): repeat the runs to tell.")


def _setting(value: str | None) -> str:
    return "(none)" if value is None else one_line(value, 80)


def _scaled(value: float, unit: str) -> tuple[float, str, int]:
    """Seconds are shown in ms, a share (0–1) in percent; rates keep their unit."""
    if unit == "s":
        return value * 1000, "ms", 2
    if unit == "share":
        return value * 100, "%", 1
    return value, unit, 2 if unit == "req/s" else 1
