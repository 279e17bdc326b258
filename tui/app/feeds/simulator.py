"""The simulator phasetop started: told when it exits on its own, and started again on its old port."""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message

from tui.app.messages import SimulatorExited, SimulatorRestarted
from tui.sim.launcher import SimulatorError, SimulatorProcess


def follow_simulator(simulator: SimulatorProcess, post: Callable[[Message], object]) -> None:
    """Be told when the simulator exits on its own (its reading thread reaps it and posts the fact)."""
    simulator.on_exit = lambda reason: post(SimulatorExited(reason))
    if not simulator.running:  # it died before the screen was up
        post(SimulatorExited(simulator.exit_line()))


def restart_simulator(simulator: SimulatorProcess, post: Callable[[Message], object]) -> None:
    """Start it again on its old port (blocking: run in a thread): the URL, the client and the host sampler all stay right."""
    try:
        simulator.restart()
    except SimulatorError as error:
        post(SimulatorRestarted(str(error)))
    else:
        post(SimulatorRestarted())
