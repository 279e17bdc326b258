"""The server phasetop runs: the simulator it started (told when it exits on its own, started again on its old
port), or the --serve command (started again with new flags)."""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message

from tui.app.messages import ServedProgress, ServedRestarted, SimulatorExited, SimulatorRestarted
from tui.core.serving.serve_command import ServeCommand
from tui.sim.launcher import SimulatorError, SimulatorProcess
from tui.sources.servers.managed_server import ServerStartError
from tui.sources.servers.served_command import ServedProcess


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


def restart_served(served: ServedProcess, command: ServeCommand, post: Callable[[Message], object]) -> None:
    """Stop the served command and start `command` in its place (blocking: run in a thread), posting its progress.

    Textual runs thread workers on the loop's executor, whose threads live as long as the app: the server is
    tied to the thread that starts it (PR_SET_PDEATHSIG, `managed_server`), so it must not be a thread of its own."""
    try:
        served.restart(command, on_wait=lambda s, line: post(ServedProgress(s, line)))
    except ServerStartError as error:
        post(ServedRestarted(str(error), error.log_tail))
    else:
        post(ServedRestarted())
