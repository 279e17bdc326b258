"""The text of a Textual SVG screenshot, row by row, to compare a committed picture with what the app draws now.

Textual writes each run of cells as a `<text>` at x = column × CELL_WIDTH, clipped to its row's `line-N` path; the
terminal's size is the clip rectangle's.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

from textual.geometry import Region

CELL_WIDTH = 12.2
LINE_HEIGHT = 24.4
_SEGMENT = re.compile(r'<text class="[^"]*" x="([\d.]+)" y="[\d.]+" textLength="[\d.]+" '
                      r'clip-path="url\(#terminal(?:-\d+)?-line-(\d+)\)">([^<]*)</text>')
_TERMINAL = re.compile(r'clip-terminal">\s*<rect x="0" y="0" width="([\d.]+)" height="([\d.]+)"')


@dataclass(frozen=True, slots=True)
class ScreenText:
    """A screenshot's terminal size and its rows as text (trailing blanks cut)."""

    size: tuple[int, int]
    rows: tuple[str, ...]

    @property
    def footer(self) -> str:
        return self.rows[-1]

    def words(self, region: Region | None = None) -> str:
        """The rows (inside `region`, when given) joined with single spaces: a wrapped sentence reads as one."""
        rows = self.rows if region is None else (row[region.x:region.right] for row in self.rows[region.y:region.bottom])
        return " ".join(" ".join(rows).split())


def screen_text(svg: str) -> ScreenText:
    width, height = (float(v) for v in _TERMINAL.search(svg).groups())
    columns, lines = round(width / CELL_WIDTH), round(height / LINE_HEIGHT)
    cells = [[" "] * columns for _ in range(lines)]
    for x, line, text in _SEGMENT.findall(svg):
        row, column = cells[int(line)], round(float(x) / CELL_WIDTH)
        for offset, char in enumerate(html.unescape(text).replace("\xa0", " ")):
            if column + offset < columns:
                row[column + offset] = char
    return ScreenText((columns, lines), tuple("".join(row).rstrip() for row in cells))


def read_screen_text(path: Path) -> ScreenText:
    return screen_text(path.read_text(encoding="utf-8"))
