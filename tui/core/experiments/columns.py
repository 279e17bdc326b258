"""The table each experiment shows: its columns (key, header, scale, unit), its cells, and a row in words.

A value with an interval in its row shows the interval's two ends, "11.1 [10.8…67.0]": a percentile's interval is as
lopsided as the data (a p99 of skewed gaps reaches far above it), and a half-width ("±55.9") would say the ITL could be
below zero. A value whose row says why it has no interval carries a mark ("9.95¹"), and the table's notes say why
("¹ fewer than 5 draws above p99"). `--json` has the interval itself (`ci_low`, `ci_high`, `level`) and the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tui.core.experiments.findings import number

SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


@dataclass(frozen=True, slots=True)
class Column:
    """One column of an experiment's table: the row key, a header, and how to show the value."""

    key: str
    label: str
    scale: float = 1.0
    unit: str = ""

    def show(self, row: dict[str, Any], mark: str = "") -> str:
        """The value, and where the row holds its interval, the interval's ends: "11.1 [10.8…67.0]"; else the value
        and `mark` (the note that says why it has none)."""
        value = row.get(self.key)
        if value is None:
            return "-"
        if isinstance(value, str):
            return value
        if not isinstance(value, float):
            return f"{value:,}"
        kept = _kept(row, self.key)
        if not kept or not kept["ci"]:
            return number(value * self.scale) + mark
        low, high = kept["ci"]
        return f"{number(value * self.scale)} [{number(low * self.scale)}…{number(high * self.scale)}]"

    def missing_interval(self, row: dict[str, Any]) -> str | None:
        """Why the row's value has no interval, where its row looked for one (`Interval.reason`); None otherwise."""
        kept = _kept(row, self.key)
        if not isinstance(row.get(self.key), float) or not kept or kept["ci"]:
            return None
        return kept.get("reason")


def _kept(row: dict[str, Any], key: str) -> dict[str, Any] | None:
    return (row.get("intervals") or {}).get(key)


@dataclass(frozen=True, slots=True)
class Table:
    """An experiment's table as text: a row of cells per row, and a note for each reason a value has no interval."""

    cells: list[list[str]]
    notes: list[str]
    """"¹ fewer than 5 draws": the mark the cells carry, and the reason."""


def table(vary: str, rows: Sequence[dict[str, Any]]) -> Table:
    """The rows' cells, each value without an interval marked by its reason's note (one mark per distinct reason)."""
    marks: dict[str, str] = {}
    cells = []
    for row in rows:
        line = []
        for column in COLUMNS[vary]:
            reason = column.missing_interval(row)
            mark = marks.setdefault(reason, str(len(marks) + 1).translate(SUPERSCRIPT)) if reason else ""
            line.append(column.show(row, mark))
        cells.append(line)
    return Table(cells, [f"{mark} {reason}" for reason, mark in marks.items()])


def notes_line(notes: Sequence[str]) -> str:
    """The notes in one line under a table, "" where there are none."""
    return f"no interval: {'  '.join(notes)}" if notes else ""


_MS = 1000.0
COLUMNS = {
    "prompt-tokens": (Column("prompt_tokens", "prompt tokens"), Column("ttft_s", "TTFT", _MS, "ms"),
                      Column("decode_tok_s", "decode", unit="tok/s"), Column("prefill_tok_s", "prefill", unit="tok/s"),
                      Column("itl_p50_s", "ITL p50", _MS, "ms")),
    "prefix": (Column("prefix_tokens", "prefix tokens"), Column("unique_ttft_s", "unique TTFT", _MS, "ms"),
               Column("first_ttft_s", "1st TTFT", _MS, "ms"), Column("second_ttft_s", "2nd TTFT", _MS, "ms"),
               Column("cached_tokens", "cached", unit="tokens")),
    "concurrency": (Column("streams", "streams"), Column("aggregate_tok_s", "aggregate", unit="tok/s"),
                    Column("per_stream_tok_s", "per stream", unit="tok/s"), Column("itl_p50_s", "ITL p50", _MS, "ms"),
                    Column("itl_p99_s", "ITL p99", _MS, "ms"), Column("ttft_p50_s", "TTFT p50", _MS, "ms")),
    "interference": (Column("prompt_tokens", "long prompt tokens"), Column("streams", "streams"),
                     Column("itl_before_s", "ITL before", _MS, "ms"), Column("itl_during_s", "worst during", _MS, "ms"),
                     Column("itl_after_s", "ITL after", _MS, "ms"), Column("prefill_ttft_s", "its TTFT", _MS, "ms")),
    "context": (Column("position", "position"), Column("itl_mean_s", "ITL mean", _MS, "ms"),
                Column("itl_p50_s", "ITL p50", _MS, "ms"), Column("n", "gaps")),
    "disaggregation": (Column("setup", "setup"), Column("prompt_tokens", "long prompt tokens"),
                       Column("itl_worst_s", "worst gap", _MS, "ms"), Column("itl_p99_s", "ITL p99", _MS, "ms"),
                       Column("itl_p50_s", "ITL p50", _MS, "ms"), Column("ttft_s", "its TTFT", _MS, "ms"),
                       Column("transfer_share", "transfer", 100.0, "%"), Column("aggregate_tok_s", "aggregate", unit="tok/s")),
    "speculation": (Column("setup", "setup"), Column("streams", "batch"), Column("decode_tok_s", "per stream", unit="tok/s"),
                    Column("itl_mean_s", "ITL mean", _MS, "ms"), Column("tokens_per_chunk", "tokens a chunk")),
}
"""The table each experiment shows, first column the value swept (disaggregation's: its setup, then the value)."""


def describe_row(vary: str, row: dict[str, Any]) -> str:
    """A row as one line of `label value unit` pairs, for progress lines and logs."""
    parts = []
    for column in COLUMNS[vary]:
        unit = f" {column.unit}" if column.unit and row.get(column.key) is not None else ""
        parts.append(f"{column.label} {column.show(row)}{unit}")
    return ", ".join(parts)
