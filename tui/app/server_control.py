"""The server phasetop runs for the main screen, and its restarts: the simulator it started (R, once it
exited on its own) or the `--serve` command (f: its flags edited, then the tuning loop: restart, wait until
the new server is identified, send the last prompts again, and open before → after once they end).

Composed into the main screen, which routes these keys and facts here."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from time import monotonic
from typing import TYPE_CHECKING

from tui.app.feeds.requests import Send
from tui.app.feeds.simulator import follow_simulator, restart_served, restart_simulator
from tui.app.messages import ServedProgress, ServedRestarted, SimulatorExited, SimulatorRestarted
from tui.app.screens.flags import FlagEditorScreen
from tui.app.screens.server_log import ServerLogScreen
from tui.app.widgets.gpu_pane import GpuPane
from tui.core.serve_command import ServeCommand, changed_flags
from tui.core.untrusted import one_line

if TYPE_CHECKING:
    from tui.app.screens.main import MainScreen

WORKLOAD_GAP_S = 5.0
"""Sends less than this apart are one workload (8 at once, then the long prompt among them): a flag change sends
them all again, each as long after the first as it was."""


class ServerControl:
    """Restarts for one main screen (`screen`): its `simulator` or `served`, whichever phasetop runs."""

    def __init__(self, screen: MainScreen) -> None:
        self._screen = screen
        self._workload: list[tuple[float, Send]] = []
        """The latest sends, each with its time after the first of them: what a flag change sends again."""
        self._workload_started = self._last_sent = 0.0
        self._rerun_after: int | None = None
        """Set by a restart: the session number before it; the rerun goes once a later one is identified."""
        self._rerun_ids: set[int] = set()
        """The rerun's requests still running."""
        self._rerun_sends = 0
        """The rerun's sends not made yet: before → after opens when none is left and no request runs."""

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
            self._workload, self._workload_started = [], now
        self._workload.append((now - self._workload_started, send))
        self._last_sent = now

    def open_log(self) -> None:
        served = self._screen.served
        self._screen.app.push_screen(ServerLogScreen(served.log_tail, f"Server log · {one_line(str(served.command), 160)}"))

    def edit_flags(self) -> None:
        served = self._screen.served
        self._screen.app.push_screen(FlagEditorScreen(served.command, served.first), self._restart)

    def _restart(self, command: ServeCommand | None) -> None:
        screen, served = self._screen, self._screen.served
        if command is None or command == served.command:
            return
        current = screen.lab.sessions.current
        self._rerun_after = current.number if current else 0
        screen.simulator_state = "starting"
        screen.server = replace(screen.server, note="restarting: " + ("; ".join(changed_flags(served.command, command))
                                                                    or "the same flags"))
        screen.run_worker(partial(restart_served, served, command, screen.post_message), group="served",
                          exclusive=True, thread=True, exit_on_error=False)

    def served_progress(self, event: ServedProgress) -> None:
        screen = self._screen
        note = (screen.server.note or "restarting").split(" · ", 1)[0]
        screen.server = replace(screen.server, note=f"{note} · {event.elapsed_s:.0f} s: {one_line(event.line, 120)}")

    def served_restarted(self, event: ServedRestarted) -> None:
        screen = self._screen
        screen.simulator_state = "running"
        screen.server = replace(screen.server, note=None)
        if event.error:
            self._rerun_after = None
            tail = "\n".join(one_line(line, 200) for line in event.log_tail.splitlines()[-3:])
            screen.notify(f"{one_line(event.error, 300)}\n{tail}".strip(), title="server not restarted",
                          severity="error", timeout=30, markup=False)

    def session_identified(self) -> None:
        """A session was identified: after a restart, the new server's; send the last prompts again."""
        screen, current = self._screen, self._screen.lab.sessions.current
        if self._rerun_after is None or current is None or current.number <= self._rerun_after:
            return
        self._rerun_after = None
        if not self._workload:
            screen.notify("restarted: send prompts, then b compares with before", title="server restarted", markup=False)
            return
        workload, self._rerun_sends = list(self._workload), len(self._workload)
        labels = ", ".join(send.label for _, send in workload)
        screen.notify(f"restarted: sending {labels} again, then before → after", title="server restarted", markup=False)
        for after_s, send in workload:
            screen.set_timer(max(after_s, 0.001), partial(self._resend, send))

    def _resend(self, send: Send) -> None:
        screen = self._screen
        again = replace(send, first_id=screen.state.send(send.concurrency))
        self._rerun_ids |= set(range(again.first_id, again.first_id + again.concurrency))
        self._rerun_sends -= 1
        if screen.send_requests(again) is None:  # the server is not known: nothing to wait for
            self._rerun_ids.clear()

    def request_completed(self, request_id: int) -> None:
        if request_id not in self._rerun_ids:
            return
        self._rerun_ids.discard(request_id)
        if not self._rerun_ids and not self._rerun_sends:
            self._screen.lab.compare_before()
