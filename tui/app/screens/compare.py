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

from tui.core.runs.compare_text import (changes_lines, figure_change, figure_value, schedule_lines, started_text, verdict_note,
                                   verdict_text, workload_line)
from tui.core.measure.uncertainty import LEVEL, PRACTICAL
from tui.core.untrusted import one_line


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
            table.add_columns("figure", "before", "after", "change [interval]", "verdict")
            for figure in comparison["figures"]:
                unit = figure["unit"]
                table.add_row(Text(figure["label"]), Text(figure_value(figure["before"], unit), justify="right"),
                              Text(figure_value(figure["after"], unit), justify="right"), Text(figure_change(figure)),
                              Text(verdict_text(figure)))
            yield table
            yield Static(verdict_note(LEVEL, 100 * PRACTICAL), id="compare-note", markup=False)
        yield Footer()


def runs_lines(comparison: dict) -> str:
    """A different workload first, then each run: id, kind and start, server, summary; then whether the server
    process changed between them."""
    lines = [line] if (line := workload_line(comparison)) else []
    for name in ("before", "after"):
        header = comparison[name]
        server = header.get("server") or {}
        where = " ".join(one_line(str(server[k]), 60) for k in ("kind", "url", "model") if server.get(k))
        lines.append(f"{name:<6}  {one_line(str(header.get('id')), 60)}  {one_line(str(header.get('kind_name')), 30)}  "
                     f"{started_text(header.get('started'))} UTC")
        lines.append(f"        {where}")
        lines.append(f"        {one_line(str(header.get('summary') or ''), 160)}")
    if comparison.get("restarted"):
        lines.append("a different server process: its start time changed")
    return "\n".join(lines)


def config_lines(comparison: dict) -> str:
    """The server's config changes ("max_num_batched_tokens  2048 → 256"), then the workload's."""
    lines = changes_lines("server config changed", comparison["config_diff"]) or ["server config: no change seen"]
    return "\n".join(lines + changes_lines("workload changed", comparison["params_diff"]) + schedule_lines(comparison))
