"""The runs view alone over the real stylesheet, and a request every saved test run holds."""

from __future__ import annotations

from pathlib import Path

from textual.app import App

import tui.app
from tui.app.screens.runs import RunsScreen

TCSS = Path(tui.app.__file__).parent / "phasetop.tcss"
REQUEST = {"ok": True, "ttft_s": 0.05, "itl_s": [0.005, 0.006], "e2e_s": 0.061, "decode_tok_s": 180.0}


class RunsHost(App):
    """The runs view of `directory`, pushed on mount."""

    CSS_PATH = TCSS

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory

    def on_mount(self) -> None:
        self.push_screen(RunsScreen(self.directory))
