"""Updating a Static's text without repainting more than changed, and never showing what a server must not put there."""

from __future__ import annotations

import re

from textual.widgets import Static

from tui.core.untrusted import printable

_NOT_SPACE = re.compile(r"\S")
MAX_PANE_CHARS = 20_000


def set_text(static: Static, text: str) -> None:
    """Show `text`: nothing when it is unchanged, and a layout pass only when its shape changed.

    A layout pass re-arranges and repaints the whole screen, several ms of the UI's loop; a figure
    that changed digits but kept each line's length and word breaks wraps the same, so it needs only
    its own repaint.

    Every pane's text passes here, so here it is made `printable`: a secret a server echoed (a model id,
    a label, an error) is redacted, and control characters are shown, whichever pane it reaches.
    """
    text = printable(text, MAX_PANE_CHARS)
    old = static.content
    if text == old:
        return
    same_shape = isinstance(old, str) and _shape(old) == _shape(text)
    static.update(text, layout=not same_shape)


def _shape(text: str) -> list[str]:
    """Each line with every non-space character masked: two texts of one shape wrap alike."""
    return [_NOT_SPACE.sub("x", line) for line in text.splitlines()]
