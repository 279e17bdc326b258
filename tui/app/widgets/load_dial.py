"""The load dial: a request rate and a concurrency turned with keys, and what the load achieves.

The load's own requests never reach the token timeline (hundreds of lanes would bury the prompt's
two); the dial sums them up instead: achieved req/s, in flight, waiting, TTFT and ITL medians.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.reactive import reactive
from textual.widgets import Static

from tui.core.delivery import DELIVERY_NOT_GENERATION
from tui.sources.load import LoadProgress


@dataclass(frozen=True, slots=True)
class DialState:
    """What the dial shows."""

    running: bool
    rate: float
    """Requests a second the load is asked for."""
    concurrency: int
    """Most requests in flight at once."""
    progress: LoadProgress | None = None
    ttft_p50_s: float | None = None
    itl_p50_s: float | None = None
    bursts: int = 0
    """Recent requests timed in bursts, left out of the medians."""
    note: str | None = None
    """A last word once stopped: the run's throughput, or why it could not run."""


class LoadDialPane(Static):
    """Two lines: the knobs (with their keys) and the achieved figures. Hidden until a load has run."""

    state: reactive[DialState | None] = reactive(None, always_update=True)

    def __init__(self, **kwargs) -> None:
        super().__init__(markup=False, **kwargs)

    def watch_state(self, state: DialState | None) -> None:
        self.display = state is not None
        if state is None:
            return
        self.set_class(state.running, "-running")
        self.update(describe(state))


def describe(state: DialState) -> str:
    """The dial as two plain-text lines."""
    status = "LOAD running" if state.running else "LOAD stopped"
    knobs = (f"{status}   rate {state.rate:g} req/s (-/+)   concurrency {state.concurrency} ([/])   "
             f"l {'stops' if state.running else 'starts'}")
    p = state.progress
    if p is None:
        return f"{knobs}\n{state.note or 'warming up…'}"
    knobs += f"   achieved {p.recent_rps:.2f} req/s"
    figures = [f"sent {p.sent}", f"done {p.finished}", f"in flight {p.in_flight}", f"waiting {p.waiting}"]
    if p.failed:
        figures.append(f"failed {p.failed}")
    if state.ttft_p50_s is not None:
        figures.append(f"TTFT p50 {state.ttft_p50_s * 1e3:,.1f} ms")
    if state.itl_p50_s is not None:
        figures.append(f"ITL p50 {state.itl_p50_s * 1e3:,.2f} ms")
    if state.bursts:
        figures.append(f"{state.bursts} timed {DELIVERY_NOT_GENERATION}, left out")
    if state.note:
        figures.append(state.note)
    return f"{knobs}\n{' · '.join(figures)}"
