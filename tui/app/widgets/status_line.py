"""The header line: which server, what model, and whether it is up."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from textual.reactive import reactive
from textual.widgets import Static

from tui.core.untrusted import one_line, without_credentials


@dataclass(frozen=True, slots=True)
class ServerState:
    """What the status line says about the server."""

    url: str
    kind: str = "?"
    """The detected API; "?" until the server has answered once (the line then says "connecting…")."""
    model: str | None = None
    max_model_len: int | None = None
    simulated: str | None = None
    """"simulated H100 · Llama-3.1-8B" when phasetop started its own simulator."""
    down_since: float | None = None
    """Unix time the server stopped answering; None while it answers."""
    down_reason: str | None = None
    config: str | None = None
    """Engine config in one line (block size, prefix caching, ...)."""


class StatusLine(Static):
    """One line (two on a narrow terminal): server, model, state."""

    state: reactive[ServerState | None] = reactive(None)
    """The server as last seen."""

    def __init__(self, **kwargs) -> None:
        super().__init__(markup=False, **kwargs)

    def watch_state(self, state: ServerState | None) -> None:
        self.set_class(bool(state and state.down_since), "-down")
        self.update(describe(state))


def describe(state: ServerState | None) -> str:
    """The line; every part a server or a user's URL sent is shown through one_line (redacted, no control
    characters), the URL without credentials."""
    if state is None:
        return "phasetop · connecting…"
    parts = []
    if state.simulated:
        parts.append(f"{state.simulated} · no GPU needed")
    parts.append(f"{one_line(state.kind)} {without_credentials(state.url)}")
    # The state comes before model and config: a long config line is cut at the right edge, the state never.
    if state.down_since is not None:
        since = datetime.fromtimestamp(state.down_since).strftime("%H:%M:%S")
        parts.append(f"DOWN since {since}" + (f": {one_line(state.down_reason, 400)}" if state.down_reason else ""))
    elif state.kind == "?":
        parts.append("connecting…")
    else:
        parts.append("up")
    if state.model:
        parts.append(one_line(state.model) + (f" (max_model_len {state.max_model_len:,})" if state.max_model_len else ""))
    if state.config:
        parts.append(one_line(state.config, 400))
    return " · ".join(parts)
