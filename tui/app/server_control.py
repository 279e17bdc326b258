"""The server phasetop runs for the main screen, and its restarts: the simulator it started (R, once it
exited on its own) or the `--serve` command (f: its flags edited, then the tuning loop: restart, wait until
the new server is identified, run the workload picked in the editor again — the last sends, the last
experiment, or the fixed probe — and open before → after once it ends).

Composed into the main screen, which routes these keys and facts here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from time import monotonic, time
from typing import TYPE_CHECKING

from tui.app.feeds.requests import Send
from tui.app.feeds.simulator import follow_simulator, restart_served, restart_simulator
from tui.app.lab import EXPERIMENT_NAMES
from tui.app.messages import ServedProgress, ServedRestarted, SimulatorExited, SimulatorRestarted
from tui.app.screens.compare import CompareScreen
from tui.app.screens.flags import FlagEditorScreen, Restart
from tui.app.screens.server_log import ServerLogScreen
from tui.app.widgets.gpu_pane import GpuPane
from tui.app.widgets.prompt_pane import PRESETS
from tui.core.experiments import OWN_SIMULATORS
from tui.core.runs import compare_runs
from tui.core.serve_command import ServeCommand, changed_flags
from tui.core.untrusted import one_line

if TYPE_CHECKING:
    from tui.app.screens.main import MainScreen

WORKLOAD_GAP_S = 5.0
"""Sends less than this apart are one workload (8 at once, then the long prompt among them): a flag change sends
them all again, each as long after the first as it was."""
PROBE = (("concurrent", 0.0), ("long", 1.0))
"""The fixed probe a restart can run (preset key, seconds after the first): 8 streams, and a second later the
long prompt lands among them: both phases and their interference, the same on every restart."""
SENDS, EXPERIMENT, PROBE_SET, NOTHING = "sends", "experiment", "probe", "nothing"
"""What a restart runs again (the flag editor's choice)."""
PROBE_AFTER = "probe after"
"""The probe picked while no server ran (a restart had failed): it runs after the restart only."""


def probe() -> list[tuple[float, Send]]:
    """The probe's sends, each with its time after the first (ids are given as each is sent)."""
    return [(after_s, next(p for p in PRESETS if p.key == key).send(0)) for key, after_s in PROBE]


class ServerControl:
    """Restarts for one main screen (`screen`): its `simulator` or `served`, whichever phasetop runs."""

    def __init__(self, screen: MainScreen) -> None:
        self._screen = screen
        self._workload: list[tuple[float, Send]] = []
        """The latest sends, each with its time after the first of them: what a flag change sends again."""
        self._workload_started = self._last_sent = self._workload_unix = 0.0
        """When the latest workload's first send went (monotonic, and wall clock to find its requests in a session), and its last."""
        self._before_since: float | None = None
        """Set by a restart that reruns sends: when the workload began on the server before it."""
        self._rerun_after: int | None = None
        """Set by a restart: the session number before it; the rerun goes once a later one is identified."""
        self._restarting: tuple[int, str] | None = None
        """The restart under way: the session number before it, and what it changes (the new session's reason)."""
        self._rerun_ids: set[int] = set()
        """The rerun's requests still running."""
        self._rerun_sends = 0
        """The rerun's sends not made yet: before → after opens when none is left and no request runs."""
        self._then: Callable[[], None] | None = None
        """What follows once the workload playing now has ended (before → after, or the restart after a probe)."""
        self._rerun = NOTHING
        """What the restart under way runs again, once the new server is identified."""
        self._experiment: dict | None = None
        """The last experiment's run: what an experiment rerun compares with."""
        self._experiment_before: dict | None = None
        """Set while an experiment reruns after a restart: its run from before."""

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

    # ---- the served command ---------------------------------------------------------------------

    def sent(self, send: Send) -> None:
        now = monotonic()
        if not self._workload or now - self._last_sent > WORKLOAD_GAP_S:
            self._workload, self._workload_started, self._workload_unix = [], now, time()
        self._workload.append((now - self._workload_started, send))
        self._last_sent = now

    def open_log(self) -> None:
        served = self._screen.served
        self._screen.app.push_screen(ServerLogScreen(served.log_tail, f"Server log · {one_line(str(served.command), 160)}"))

    def edit_flags(self) -> None:
        served = self._screen.served
        self._screen.app.push_screen(FlagEditorScreen(served.command, served.first, self._reruns()), self._restart)

    def _reruns(self) -> list[tuple[str, str]]:
        """What a restart can run again, the likeliest first: the last sends, the last experiment, the probe."""
        reruns = []
        if self._workload:
            reruns.append((SENDS, "the last sends: " + ", ".join(send.label for _, send in self._workload)))
        if self._experiment is not None:
            reruns.append((EXPERIMENT, f"the last experiment: {EXPERIMENT_NAMES[self._experiment['params']['vary']]}"))
        first, then = (send.label for _, send in probe())
        reruns.append((PROBE_SET, f"the probe, before and after: {first}, then {then} among them"))
        reruns.append((NOTHING, "nothing (send, then b compares)"))
        return reruns

    def experiment_ran(self, run: dict) -> None:
        """An experiment ended with rows: after a restart's rerun, before → after over it; else it is the last."""
        before, self._experiment_before = self._experiment_before, None
        if run["params"]["vary"] in OWN_SIMULATORS:
            return  # it ran on simulators of its own, not on this server: no restart changes it
        self._experiment = run
        if before is not None and before["params"]["vary"] == run["params"]["vary"]:  # not one the rerun was left for
            name = EXPERIMENT_NAMES[run["params"]["vary"]]
            self._screen.app.push_screen(CompareScreen(compare_runs(before, run),
                                                       f"{name} before the restart against after it"))

    def _restart(self, restart: Restart | None) -> None:
        """The editor's answer. For the probe, it runs first on the server as it is (so both sides ran it), then
        the restart; otherwise the restart goes at once."""
        served = self._screen.served
        if restart is None or (restart.command == served.command and served.running):
            return
        self._rerun = restart.rerun
        if restart.rerun == PROBE_SET and not served.running:
            # A restart that failed left nothing running: there is no "before" to probe, so the probe runs after.
            self._rerun = PROBE_AFTER
            self._screen.notify("the server is down: restarting now; the probe runs after it, with nothing before "
                                "it to compare", title="probe", markup=False)
            self._begin_restart(restart.command)
        elif restart.rerun == PROBE_SET:
            self._screen.notify("the probe first, on the server as it is; then the restart", title="probe", markup=False)
            self._play(probe(), partial(self._begin_restart, restart.command))
        else:
            self._begin_restart(restart.command)

    def _begin_restart(self, command: ServeCommand) -> None:
        screen, served = self._screen, self._screen.served
        current = screen.lab.sessions.current
        self._rerun_after = current.number if current else 0
        self._before_since = self._workload_unix if self._rerun in (SENDS, PROBE_SET) else None
        changes = "; ".join(changed_flags(served.command, command)) or "the same flags"
        self._restarting = (self._rerun_after, changes)
        screen.simulator_state = "starting"
        screen.server = replace(screen.server, note="restarting: " + changes)
        screen.run_worker(partial(restart_served, served, command, screen.post_message), group="served",
                          exclusive=True, thread=True, exit_on_error=False)

    def served_progress(self, event: ServedProgress) -> None:
        screen = self._screen
        note = (screen.server.note or "restarting").split(" · ", 1)[0]
        screen.server = replace(screen.server, note=f"{note} · {event.elapsed_s:.0f} s: {one_line(event.line, 120)}")

    def served_restarted(self, event: ServedRestarted) -> None:
        screen, (before, changes) = self._screen, self._restarting or (0, "")
        self._restarting = None
        screen.simulator_state = "running"
        screen.server = replace(screen.server, note=None)
        current = screen.lab.sessions.current
        if not event.error and current is not None and current.number <= before:
            # Not seen in its metrics yet (and a server with no start time that had counted nothing never shows
            # it there): the new session begins now, and the readings of the old process are no baseline.
            if screen.scraper is not None:
                screen.scraper.forget()
            screen.lab.restarted((f"phasetop restarted it: {changes}",))
        if event.error:
            self._rerun_after = None
            error = one_line(event.error, 300)
            tail = "\n".join(line for line in (one_line(line, 200) for line in event.log_tail.splitlines()[-3:])
                             if line not in error)  # the error often quotes the log's last line
            screen.notify(f"{error}\n{tail}".strip(), title="server not restarted", severity="error", timeout=30,
                          markup=False)

    def session_identified(self) -> None:
        """A session was identified: after a restart, the new server's; run the picked workload again."""
        screen, current = self._screen, self._screen.lab.sessions.current
        if self._rerun_after is None or current is None or current.number <= self._rerun_after:
            return
        self._rerun_after = None
        if self._rerun == EXPERIMENT and self._experiment is not None:
            self._experiment_before = self._experiment
            screen.notify("restarted: the experiment again, then before → after", title="server restarted", markup=False)
            screen.lab.sweep(self._experiment["params"]["vary"], self.experiment_ran)
            return
        if self._rerun == PROBE_AFTER:
            screen.notify("restarted: the probe, on the new server alone", title="server restarted", markup=False)
            self._play(probe(), lambda: None)
            return
        workload = self._workload if self._rerun == SENDS else probe() if self._rerun == PROBE_SET else []
        if not workload:
            screen.notify("restarted: send prompts, then b compares with before", title="server restarted", markup=False)
            return
        labels = ", ".join(send.label for _, send in workload)
        screen.notify(f"restarted: sending {labels} again, then before → after", title="server restarted", markup=False)
        self._play(list(workload), partial(screen.lab.compare_before, self._before_since))

    def _play(self, workload: list[tuple[float, Send]], then: Callable[[], None]) -> None:
        """Send each of `workload` as long after the first as it says; `then` once all its requests ended. It is
        a workload of its own (what a later restart sends again), whatever was sent just before it."""
        self._rerun_sends, self._then, self._workload = len(workload), then, []
        for after_s, send in workload:
            self._screen.set_timer(max(after_s, 0.001), partial(self._resend, send))

    def _resend(self, send: Send) -> None:
        screen = self._screen
        again = replace(send, first_id=screen.state.send(send.concurrency))
        self._rerun_ids |= set(range(again.first_id, again.first_id + again.concurrency))
        self._rerun_sends -= 1
        if screen.send_requests(again) is None:  # the server is not known (it says so): nothing to wait for
            self._rerun_ids.clear()
            self._then = None

    def request_completed(self, request_id: int) -> None:
        self._ended(range(request_id, request_id + 1))

    def not_sent(self, request_ids: range) -> None:
        """A send that could not begin ends its requests as far as the workload playing is concerned."""
        self._ended(request_ids)

    def _ended(self, request_ids: range) -> None:
        if self._rerun_ids.isdisjoint(request_ids):
            return
        self._rerun_ids.difference_update(request_ids)
        if not self._rerun_ids and not self._rerun_sends and self._then is not None:
            then, self._then = self._then, None
            then()
