"""The server phasetop runs for the main screen, and its restarts: the simulator it started (R, once it
exited on its own) or the `--serve` command (f: its flags edited, then the tuning loop, `tui.core.tuning_loop`,
whose effects this class runs: restart, play a workload again, open before → after).

Composed into the main screen, which routes these keys and facts here."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from time import monotonic, time
from typing import TYPE_CHECKING

from tui.app.feeds.simulator import follow_simulator, restart_served, restart_simulator
from tui.app.messages import ServedProgress, ServedRestarted, SimulatorExited, SimulatorRestarted
from tui.app.screens.compare import CompareScreen
from tui.app.screens.flags import FlagEditorScreen
from tui.app.screens.server_log import ServerLogScreen
from tui.app.widgets.gpu_pane import GpuPane
from tui.app.widgets.prompt_pane import PRESETS
from tui.core.runs import compare_runs
from tui.core.sends import Send
from tui.core.tuning_loop import (CompareBefore, CompareRuns, Effect, NewSession, Notify, Play, RestartRequest,
                                  RunExperiment, Server, StartRestart, TuningLoop)
from tui.core.untrusted import one_line

if TYPE_CHECKING:
    from tui.app.screens.main import MainScreen

PROBE = (("concurrent", 0.0), ("long", 1.0))
"""The fixed probe a restart can run (preset key, seconds after the first): 8 streams, and a second later the
long prompt lands among them: both phases and their interference, the same on every restart."""


def probe() -> list[tuple[float, Send]]:
    """The probe's sends, each with its time after the first (ids are given as each is sent)."""
    return [(after_s, next(p for p in PRESETS if p.key == key).send(0)) for key, after_s in PROBE]


class ServerControl:
    """Restarts for one main screen (`screen`): its `simulator` or `served`, whichever phasetop runs."""

    def __init__(self, screen: MainScreen) -> None:
        self._screen = screen
        self.loop = TuningLoop(probe())

    def follow(self) -> None:
        if self._screen.simulator is not None:
            follow_simulator(self._screen.simulator, self._screen.post_message)

    def why_disabled(self, action: str) -> str | None:
        screen = self._screen
        if action == "restart_simulator" and screen.simulator_state != "exited":
            return "the simulator is running: R starts it again once it has exited"
        if action in ("edit_flags", "server_log") and screen.served is None:
            return "phasetop did not start this server: run it as `phasetop --serve \"CMD\"` to restart it with new flags"
        if action == "edit_flags" and screen.simulator_state == "starting":
            return "the server is starting: wait for it"
        return None

    # ---- the simulator --------------------------------------------------------------------------

    def restart_simulator(self) -> None:
        screen = self._screen
        screen.simulator_state = "starting"
        screen.run_worker(partial(restart_simulator, screen.simulator, screen.post_message), group="simulator",
                          exclusive=True, thread=True, exit_on_error=False)

    def simulator_exited(self, event: SimulatorExited) -> None:
        reason = one_line(event.reason, 300)
        self._screen.simulator_state = "exited"
        self._screen.query_one(GpuPane).server_exit = reason
        self._screen.notify(f"the simulator phasetop started exited ({reason}). Press R to start it again.",
                            title="simulator exited", severity="error", timeout=30, markup=False)

    def simulator_restarted(self, event: SimulatorRestarted) -> None:
        screen = self._screen
        if event.error:
            screen.simulator_state = "exited"
            screen.notify(one_line(event.error, 300), title="simulator not restarted", severity="error", markup=False)
            return
        screen.simulator_state = "running"
        screen.query_one(GpuPane).server_exit = None
        screen.notify("the simulator is running again", title="simulator restarted", markup=False)

    # ---- the served command: the tuning loop's events in, its effects run -------------------------

    def sent(self, send: Send) -> None:
        self.loop.sent(send, monotonic(), time())

    def open_log(self) -> None:
        served = self._screen.served
        self._screen.app.push_screen(ServerLogScreen(served.log_tail, f"Server log · {one_line(str(served.command), 160)}"))

    def edit_flags(self) -> None:
        served = self._screen.served
        self._screen.app.push_screen(FlagEditorScreen(served.command, served.first, self.loop.reruns()), self._edited)

    def _edited(self, restart: RestartRequest | None) -> None:
        self._run(self.loop.edited(restart, self._server()))

    def experiment_ran(self, run: dict) -> None:
        self._run(self.loop.experiment_ran(run))

    def served_progress(self, event: ServedProgress) -> None:
        screen = self._screen
        note = (screen.server.note or "restarting").split(" · ", 1)[0]
        screen.server = replace(screen.server, note=f"{note} · {event.elapsed_s:.0f} s: {one_line(event.line, 120)}")

    def served_restarted(self, event: ServedRestarted) -> None:
        self._screen.simulator_state = "running"
        self._screen.server = replace(self._screen.server, note=None)
        self._run(self.loop.restarted(event.error, event.log_tail, self._server()))

    def session_identified(self) -> None:
        if self._screen.served is not None:  # (no served command, no tuning loop)
            self._run(self.loop.session_identified(self._server()))

    def request_completed(self, request_id: int) -> None:
        self.not_sent(range(request_id, request_id + 1))

    def not_sent(self, request_ids: range) -> None:
        """A send that could not begin ends its requests as far as the workload playing is concerned."""
        if self._screen.served is not None:
            self._run(self.loop.ended(request_ids, self._server()))

    def _server(self) -> Server:
        served, current = self._screen.served, self._screen.lab.sessions.current
        return Server(served.command, served.running, current.number if current else 0)

    def _run(self, effects: list[Effect]) -> None:
        screen = self._screen
        for effect in effects:
            match effect:
                case Notify(message, title, severity, timeout):
                    screen.notify(message, title=title, severity=severity, timeout=timeout, markup=False)
                case StartRestart(command, changes):
                    screen.simulator_state = "starting"
                    screen.server = replace(screen.server, note="restarting: " + changes)
                    screen.run_worker(partial(restart_served, screen.served, command, screen.post_message),
                                      group="served", exclusive=True, thread=True, exit_on_error=False)
                case NewSession(reason):
                    if screen.scraper is not None:
                        screen.scraper.forget()
                    screen.lab.restarted((reason,))
                case Play(workload):
                    for after_s, send in workload:
                        screen.set_timer(max(after_s, 0.001), partial(self._resend, send))
                case CompareBefore(since_unix):
                    screen.lab.compare_before(since_unix)
                case RunExperiment(vary):
                    screen.lab.sweep(vary, self.experiment_ran)
                case CompareRuns(before, after, title):
                    screen.app.push_screen(CompareScreen(compare_runs(before, after), title))

    def _resend(self, send: Send) -> None:
        screen = self._screen
        again = replace(send, first_id=screen.state.send(send.concurrency))
        sent = screen.send_requests(again) is not None  # not when the server is not known (it says so)
        self.loop.resent(range(again.first_id, again.first_id + again.concurrency) if sent else None)
