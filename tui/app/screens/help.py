"""The help screen, built from the active bindings so it never drifts from the keys."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

INTRO = (
    "phasetop shows the two phases of inference. Prefill reads the whole prompt in one compute-bound "
    "pass and sets the time to first token; decode writes one token a step, bound by memory bandwidth, "
    "and sets tokens per second."
)


class HelpScreen(ModalScreen[None]):
    """Every key the main screen answers to, with what it does."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close help", id="help.close")]

    def __init__(self, bindings: list[tuple[str, str]]) -> None:
        super().__init__()
        self._keys = bindings

    def compose(self) -> ComposeResult:
        width = max((len(key) for key, _ in self._keys), default=4)
        lines = [INTRO, "", "Keys:"] + [f"  {key:<{width}}  {description}" for key, description in self._keys]
        lines += ["", "ctrl+p opens the command palette with the same actions. escape closes this."]
        with VerticalScroll(id="help-body"):
            yield Static("\n".join(lines), markup=False)
