"""The table each experiment shows: its columns (key, header, scale, unit), and a row in words.

A value with an interval in its row shows how far the interval reaches from it, the farther side
("66.1 ±1.9": the 99 % interval lies within 64.2 … 68.0); `--json` has the interval itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.core.experiments.findings import number


@dataclass(frozen=True, slots=True)
class Column:
    """One column of an experiment's table: the row key, a header, and how to show the value."""

    key: str
    label: str
    scale: float = 1.0
    unit: str = ""

    def show(self, row: dict) -> str:
        """The value, and where the row holds its interval, how far that reaches from it: "66.1 ±1.9"."""
        value = row.get(self.key)
        if value is None:
            return "-"
        if isinstance(value, str):
            return value
        if not isinstance(value, float):
            return f"{value:,}"
        kept = (row.get("intervals") or {}).get(self.key)
        if not kept or not kept["ci"]:
            return number(value * self.scale)
        low, high = kept["ci"]
        return f"{number(value * self.scale)} ±{number(max(high - value, value - low) * self.scale)}"


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
}
"""The table each experiment shows, first column the value swept (disaggregation's: its setup, then the value)."""


def describe_row(vary: str, row: dict) -> str:
    """A row as one line of `label value unit` pairs, for progress lines and logs."""
    parts = []
    for column in COLUMNS[vary]:
        unit = f" {column.unit}" if column.unit and row.get(column.key) is not None else ""
        parts.append(f"{column.label} {column.show(row)}{unit}")
    return ", ".join(parts)
