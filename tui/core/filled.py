"""Text cut into lines between whole pieces: a figure and its unit ("6.5 tok/s") never split over two lines."""

from __future__ import annotations

from collections.abc import Sequence


def filled(pieces: Sequence[tuple[str, str]], width: int | None) -> str:
    """`pieces` (text, the separator before it) in lines no wider than `width` where each fits (None: one line);
    a break drops the separator there."""
    lines: list[str] = []
    for text, separator in pieces:
        if lines and (width is None or len(lines[-1]) + len(separator) + len(text) <= width):
            lines[-1] += separator + text
        else:
            lines.append(text)
    return "\n".join(lines)
