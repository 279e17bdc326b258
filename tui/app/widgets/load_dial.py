"""The load dial: a request rate and a concurrency turned with keys, and what the load achieves.

Each of the load's requests streams on the timeline as a lane of its own ("load N"); the dial sums them all up:
achieved req/s, in flight, waiting, TTFT and ITL medians.
"""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Static

from tui.core.measure.delivery import DELIVERY_NOT_GENERATION
from tui.core.state.lab import DialState


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
