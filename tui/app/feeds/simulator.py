"""The server phasetop runs: the simulator it started (told when it exits on its own, started again on its old
port), or the --serve command (started again with new flags, or its last good ones)."""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message

from tui.app.messages import ServedProgress, ServedRestarted, SimulatorExited, SimulatorRestarted
from tui.core.serving.serve_command import ServeCommand
from tui.core.state.tuning_loop import Refusal
from tui.sources.servers.simulator_server import SimulatorError, SimulatorProcess
from tui.sources.servers.managed_server import ServerStartError
from tui.sources.servers.served_command import RestartRefused, ServedProcess


def follow_simulator(simulator: SimulatorProcess, post: Callable[[Message], object]) -> None:
    """Be told when the simulator exits on its own (its reading thread reaps it and posts the fact)."""
    simulator.on_exit = lambda reason: post(SimulatorExited(reason))
    if not simulator.running:  # it died before the screen was up
        post(SimulatorExited(simulator.exit_line()))


def restart_simulator(simulator: SimulatorProcess, post: Callable[[Message], object]) -> None:
    """Start it again on its old port (blocking: run in a thread): the URL, the client and the host sampler all stay right."""
    _started_again(simulator.restart, post)


def restart_served(served: ServedProcess, command: ServeCommand, post: Callable[[Message], object]) -> None:
    """Stop the served command and start `command` in its place (blocking: run in a thread), posting its progress;
    a command that does not start leaves the last good one running again (`RestartRefused`).

    Textual runs thread workers on the loop's executor, whose threads live as long as the app: the server is
    tied to the thread that starts it (PR_SET_PDEATHSIG, `managed_server`), so it must not be a thread of its own."""
    try:
        served.restart(command, on_wait=lambda s, line: post(ServedProgress(s, line)))
    except RestartRefused as refused:
        post(ServedRestarted(Refusal(command, str(refused), refused.log_tail, True, refused.fallback_error)))
    except ServerStartError as error:  # refused before anything stopped: the server runs as it was
        post(ServedRestarted(Refusal(command, str(error), error.log_tail, stopped=False)))
    else:
        post(ServedRestarted())


def start_served_again(served: ServedProcess, post: Callable[[Message], object]) -> None:
    """Start the served command's last good flags again (blocking: run in a thread), once it exited."""
    _started_again(lambda: served.start_again(on_wait=lambda s, line: post(ServedProgress(s, line))), post)


def _started_again(start: Callable[[], None], post: Callable[[Message], object]) -> None:
    """Run `start` and post whether the server came back (`SimulatorRestarted`, with why not)."""
    try:
        start()
    except (SimulatorError, ServerStartError) as error:
        post(SimulatorRestarted(str(error)))
    else:
        post(SimulatorRestarted())
