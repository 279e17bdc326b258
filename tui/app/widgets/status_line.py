"""The header: which server, what model, whether it is up, and the engine config a restart changes."""

from __future__ import annotations

from datetime import datetime

from textual.reactive import reactive
from textual.widgets import Static

from tui.core.state.server_state import ServerState
from tui.core.telemetry.speculation import ceiling_text
from tui.core.untrusted import one_line, without_credentials
from tui.core.filled import filled


class StatusLine(Static):
    """The header: the server and its state, then the config, each part whole, on as many lines as the width needs
    (at most four); a DOWN reason wraps whole rather than being cut."""

    state: reactive[ServerState | None] = reactive(None)
    """The server as last seen."""

    def __init__(self, **kwargs) -> None:
        super().__init__(markup=False, **kwargs)

    def watch_state(self, state: ServerState | None) -> None:
        self.set_class(bool(state and state.down_since), "-down")
        self._show()

    def on_resize(self) -> None:
        self._show()

    def _show(self) -> None:
        # A str to a markup=False Static is plain text: nothing a server sent is read as markup.
        self.update(describe(self.state, self.content_size.width or None))


def describe(state: ServerState | None, width: int | None = None) -> str:
    """The header's text: the server's parts, then the config's settings, each kept whole, filling lines of `width`
    (a part never breaks across lines: "ceiling 209 tok/s" wrapped left "tok/s" alone). Every part a server or a
    user's URL sent is shown through one_line (redacted, no control characters), the URL without credentials."""
    if state is None:
        return "phasetop · connecting…"
    config = one_line(state.config, 400) if state.config else ""
    if not config and state.max_model_len:
        config = f"max_model_len={state.max_model_len}"
    settings = [(setting, " " if n else " · ") for n, setting in enumerate(config.split())]
    return filled([(part, " · ") for part in _server_parts(state)] + settings, width)


def _server_parts(state: ServerState) -> list[str]:
    parts = []
    if state.simulated:
        parts.append(f"{state.simulated} · no GPU needed")
    url = without_credentials(state.url)
    # The state comes before the model: a long line wraps after it, and the state is never what is lost.
    if state.kind == "?":
        parts.append(f"unknown API {url}" if state.down_since is not None else f"{url}")
    else:
        parts.append(f"{one_line(state.kind)} {url}")
    if state.down_since is not None:
        since = datetime.fromtimestamp(state.down_since).strftime("%H:%M:%S")
        parts.append(f"DOWN since {since}" + (f": {one_line(state.down_reason, 400)}" if state.down_reason else ""))
    elif state.kind == "?":
        parts.append("connecting…")
    else:
        parts.append("up")
    if state.note:
        parts.append(one_line(state.note, 300))
    if state.model:
        parts.append(one_line(state.model))
    if state.device and not state.simulated:  # a simulator phasetop started names its device first
        parts.append(f"on {one_line(state.device)}")
    if state.ceiling_tok_s:
        parts.append(ceiling_text(state.ceiling_tok_s, state.ceiling_factor))
    return parts
