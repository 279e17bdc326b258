"""Two runs side by side: what changed in the server first, then TTFT, ITL, decode and bandwidth before and after.

Everything shown comes from the run files or the server (model names, flags, URLs): plain text only.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from tui.core.sse import one_line


class CompareScreen(Screen[None]):
    """`compare_sessions`' answer, read top down: the runs, the config diff, the figures."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back", tooltip="Back to where you came from", id="compare.back")]

    def __init__(self, comparison: dict, title: str) -> None:
        super().__init__()
        self.comparison = comparison
        self.title = title

    def compose(self) -> ComposeResult:
        comparison = self.comparison
        with VerticalScroll(id="compare-body"):
            yield Static(self.title, id="compare-title", markup=False)
            yield Static(runs_lines(comparison), id="compare-runs", markup=False)
            changed = bool(comparison["config_diff"])
            yield Static(config_lines(comparison), id="compare-config", markup=False,
                         classes="-changed" if changed else "")
            table: DataTable = DataTable(id="compare-figures", cursor_type="row", zebra_stripes=True)
            table.add_columns("figure", "before", "after", "change")
            for figure in comparison["figures"]:
                unit = figure["unit"]
                table.add_row(Text(figure["label"]), Text(cell(figure["before"], unit), justify="right"),
                              Text(cell(figure["after"], unit), justify="right"),
                              Text(change(figure["delta"], figure["delta_pct"], unit), justify="right"))
            yield table
        yield Footer()


def runs_lines(comparison: dict) -> str:
    lines = []
    for name in ("before", "after"):
        header = comparison[name]
        server = header.get("server") or {}
        where = " ".join(one_line(str(server[k]), 60) for k in ("kind", "url", "model") if server.get(k))
        lines.append(f"{name:<6}  {one_line(str(header.get('id')), 60)}  {started_text(header.get('started'))} UTC")
        lines.append(f"        {where}")
        lines.append(f"        {one_line(str(header.get('summary') or ''), 160)}")
    if comparison.get("restarted"):
        lines.append("a different server process: its start time changed")
    return "\n".join(lines)


def started_text(started: object) -> str:
    """"2026-11-29T12:15:00.123Z" shown as "2026-11-29 12:15:00"."""
    return one_line(str(started or "-"), 40).replace("T", " ")[:19]


def config_lines(comparison: dict) -> str:
    """The server's config changes ("max_num_batched_tokens  2048 → 256"), then the workload's."""
    lines = []
    for title, rows in (("server config changed:", comparison["config_diff"]), ("workload changed:", comparison["params_diff"])):
        if not rows:
            continue
        width = max(len(one_line(row["key"], 60)) for row in rows)
        lines.append(title)
        lines += [f"  {one_line(row['key'], 60):<{width}}  {_setting(row['before'])} → {_setting(row['after'])}" for row in rows]
    if not comparison["config_diff"]:
        lines.insert(0, "server config: no change seen")
    return "\n".join(lines)


def _setting(value: str | None) -> str:
    return "(none)" if value is None else one_line(value, 80)


def _scaled(value: float, unit: str) -> tuple[float, str, int]:
    """Seconds in ms; a share (0–1) in percent; rates keep their unit."""
    if unit == "s":
        return value * 1000, "ms", 2
    if unit == "share":
        return value * 100, "%", 1
    return value, unit, 2 if unit == "req/s" else 1


def cell(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    shown, shown_unit, digits = _scaled(value, unit)
    return f"{shown:,.{digits}f} {shown_unit}"


def change(delta: float | None, delta_pct: float | None, unit: str) -> str:
    if delta is None:
        return "-"
    shown, shown_unit, digits = _scaled(delta, unit)
    if unit == "share":
        shown_unit = "points"
    percent = f" ({delta_pct:+.1f} %)" if delta_pct is not None else ""
    return f"{shown:+,.{digits}f} {shown_unit}{percent}"
