"""What the core's state machines ask of every screen alike (`tui.core.state.lab`, `tui.core.state.tuning_loop`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Notify:
    """A toast: `message` under `title` (plain text, never markup)."""

    message: str
    title: str
    severity: str = "information"
    timeout: float | None = None
