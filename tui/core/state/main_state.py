"""The main screen's whole state behind one face: the live session (`live`), the lab (`lab`) and the tuning loop
(`loop`), each fact given once and handed on in the order they need (a scrape goes to the lab, then the live
session; a restart the loop saw opens the lab's next session), answered with effects for the screen to run.

What the loop asks of the lab (a new session, before → after, an experiment again) is done here, so the screen only
ever runs IO: workers, timers, screens, toasts (`tui.app.screens.main_effects`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tui.core.hardware.roofline_live import LiveRoofline, live_roofline, live_target
from tui.core.measure.records import RequestTiming
from tui.core.measure.sends import Send
from tui.core.serving.serve_command import ServeCommand
from tui.core.state.effects import Notify
from tui.core.state.lab import Lab, LabEffect
from tui.core.state.live import LiveSession, Published
from tui.core.state.server_watch import Served, ServerWatch
from tui.core.state.tuning_loop import (
    CompareBefore,
    Effect,
    NewSession,
    Refusal,
    RestartRequest,
    RunExperiment,
    Server,
    StartRestart,
    TuningLoop,
    restart_key_disabled,
)
from tui.core.telemetry.readings import GpuSample, MetricsSnapshot
from tui.core.untrusted import one_line


@dataclass(frozen=True, slots=True)
class Publish:
    """The timeline's state to the panes, once after the facts already queued (a burst of token batches is one)."""


@dataclass(frozen=True, slots=True)
class MarkDown:
    """The panes marked as the server being down, or no longer."""

    down: bool


@dataclass(frozen=True, slots=True)
class FindServer:
    """Describe the server again (its metrics say it restarted, even between two scrapes that never saw it down)."""


@dataclass(frozen=True, slots=True)
class StartMeters:
    """The server is up: the meter processes start, so the first send finds its meter ready."""


@dataclass(frozen=True, slots=True)
class ForgetScrapes:
    """The metrics window starts again: the process before phasetop's restart is no baseline for this one."""


@dataclass(frozen=True, slots=True)
class ExitNote:
    """What the GPU/host pane says of the server phasetop runs having exited (R starts it); None: nothing."""

    what: str | None


ScreenEffect = LabEffect | Effect | Publish | MarkDown | FindServer | StartMeters | ForgetScrapes | ExitNote

RUNNING, EXITED, STARTING = "running", "exited", "starting"
"""The server phasetop runs (its simulator, or the --serve command): running, exited without being asked (R starts
it again), or starting (again)."""


@dataclass(frozen=True, slots=True)
class Running:
    """The server command phasetop runs, as its process is now: its command line and whether it runs."""

    command: ServeCommand
    running: bool


class MainState:
    """The live session, the lab and the tuning loop of one main screen; `clock` stamps the lab's sessions."""

    def __init__(self, live: LiveSession, lab: Lab, loop: TuningLoop,
                 clock: Callable[[], datetime] = lambda: datetime.now().astimezone()) -> None:
        self.live = live
        self.server: ServerWatch = live.server
        self.lab = lab
        self.loop = loop
        self.clock = clock
        self.server_state = RUNNING
        """The server phasetop runs, if it runs one (`RUNNING`, `EXITED`, `STARTING`)."""
        self.kept: list[RequestTiming] = []
        """Every request kept as of the last publish, those cleared from the timeline too (the roofline and the
        traffic view read them)."""

    def why_disabled(self, action: str, serves: bool) -> str | None:
        """Why a key cannot act now (its binding shown disabled, pressing it says this), or None. `serves`: phasetop
        runs a server command (--serve, or the simulator it started)."""
        return restart_key_disabled(action, self.server_state, serves) or self.lab.why_disabled(action)

    # ---- the server ----------------------------------------------------------------------------

    def server_up(self, served: Served, fresh: bool | None, max_model_len: int | None) -> list[ScreenEffect]:
        self.server.server_up(served, fresh, max_model_len)
        effects: list[ScreenEffect] = [MarkDown(False), *self.lab.server_up(self.clock())]
        self._ceiling_known()
        return [*effects, StartMeters()]

    def server_down(self, since: float, reason: str | None, running: Running | None,
                    exit_line: Callable[[], str]) -> list[ScreenEffect]:
        """The server stopped answering; where it is the command phasetop runs that ended (`running`: None for its
        own simulator, which says so itself), that is said too, with `exit_line()`: how it ended (untrusted)."""
        self.server.server_down(since, reason)
        effects: list[ScreenEffect] = [MarkDown(True)]
        if running is not None and not running.running and self.server_state == RUNNING:
            effects += self.exited(f"the server phasetop runs exited ({one_line(exit_line(), 300)})")
        return effects

    def scraped(self, snapshot: MetricsSnapshot) -> list[ScreenEffect]:
        """A /metrics reading: the lab sees a restart in it first (a new session), then the live session reads it."""
        effects: list[ScreenEffect] = [*self.lab.scraped(snapshot, self.clock())]
        ceiling = self.server.decode_ceiling_tok_s
        back = self.server.scraped(snapshot)
        if (now := self.server.decode_ceiling_tok_s) != ceiling:  # a speculating server's tokens a step moved it
            self._ceiling_known()
            if now is not None and (ceiling is None or now > ceiling):
                self.live.judge_again(now)  # a lane flagged only for beating the old ceiling may be lifted
            effects.append(Publish())
        if back:
            effects.append(MarkDown(False))
        if snapshot.restart:
            effects.append(FindServer())
        return effects

    def gpu_sampled(self, sample: GpuSample) -> list[ScreenEffect]:
        self.lab.gpu_sampled(sample)
        self.server.gpu_sampled(sample.devices)
        self._ceiling_known()
        return []

    def identified(self, number: int, identity: dict[str, Any], info: object, max_model_len: int | None,
                   running: Running | None) -> list[ScreenEffect]:
        """Session `number`'s server was read (`info`: as described); the tuning loop hears of it where phasetop
        runs the server."""
        if self.lab.identified(number, identity, info, max_model_len):
            self.server.identified(identity.get("simulator_flags"))
        self._ceiling_known()
        return self._for_screen(self.loop.session_identified(self._server(running))) if running else []

    def _ceiling_known(self) -> None:
        self.lab.ceiling_known(self.server.decode_ceiling_tok_s)

    # ---- the server phasetop runs ----------------------------------------------------------------

    def exited(self, what: str) -> list[ScreenEffect]:
        """The server phasetop runs exited without being asked (`what`: said on the GPU/host pane and in a toast)."""
        self.server_state = EXITED
        return [ExitNote(what), Notify(f"{what}. Press R to start it again.", "server exited", "error", 30)]

    def simulator_exited(self, reason: str) -> list[ScreenEffect]:
        return self.exited(f"the simulator exited ({one_line(reason, 300)})")

    def starting_again(self) -> None:
        self.server_state = STARTING

    def started_again(self, error: str | None) -> list[ScreenEffect]:
        """R's start ended: running again, or `error` (R tries again)."""
        if error:
            self.server_state = EXITED
            return [Notify(f"{one_line(error, 300)}. R tries again.", "server not started", "error")]
        self.server_state = RUNNING
        return [ExitNote(None), Notify("the server is running again", "server started")]

    def edited(self, restart: RestartRequest | None, running: Running) -> list[ScreenEffect]:
        """The flag editor closed: with a restart asked for, or none."""
        return self._for_screen(self.loop.edited(restart, self._server(running)))

    def restart_progress(self, elapsed_s: float, line: str) -> None:
        self.server.restart_progress(elapsed_s, line)

    def restarted(self, refusal: Refusal | None, running: Running) -> list[ScreenEffect]:
        """A restart with new flags ended: the new command runs, or was refused (the last good one in its place,
        or nothing where that failed too)."""
        self.server_state = RUNNING if running.running else EXITED
        self.server.restart_ended()
        shown = None if running.running else "no server runs: the restart and the last good flags both failed"
        return [ExitNote(shown), *self._for_screen(self.loop.restarted(refusal, self._server(running)))]

    # ---- requests --------------------------------------------------------------------------------

    def sending(self, send: Send, now_s: float, now_unix: float) -> Served | None:
        """`send` is about to go out: the lab's session and the tuning loop count it. None: the server is not known
        yet, so nothing goes out."""
        served = self.server.served
        if served is None or served.model is None:
            return None
        self.loop.sent(send, now_s, now_unix)
        self.lab.sent(send, now_unix)
        return served

    def completed(self, request_id: int, timing: RequestTiming, load: bool,
                  running: Running | None) -> list[ScreenEffect]:
        """A request ended; the load dial's are its own run (the dial counts their failures)."""
        self.live.completed(request_id, timing)
        if load:
            return [Publish()]
        effects: list[ScreenEffect] = [*self.lab.request_completed(timing),
                                       *self._ended(range(request_id, request_id + 1), running)]
        if not timing.ok:
            effects.append(Notify(timing.error or "request failed", "request failed", "error"))
        return [*effects, Publish()]

    def not_sent(self, request_ids: range, reason: str, running: Running | None) -> list[ScreenEffect]:
        return [Notify(reason, "not sent", "error"), *self._ended(request_ids, running)]

    def _ended(self, request_ids: range, running: Running | None) -> list[ScreenEffect]:
        """Requests that finished, or could not begin, end their part of the workload the tuning loop plays."""
        return self._for_screen(self.loop.ended(request_ids, self._server(running))) if running else []

    def experiment_ran(self, run: dict[str, Any]) -> list[ScreenEffect]:
        self.lab.experiment_ran(run)
        return self._for_screen(self.loop.experiment_ran(run))

    def publish(self) -> Published:
        published = self.live.publish()
        self.kept = published.kept
        return published

    def roofline(self, server_is_local: bool) -> LiveRoofline:
        """Where the kept requests and the server's window sit under the device's roofs."""
        server = self.server
        target = live_target(server.simulator_flags, server.served.model if server.served else None, server.devices,
                             server_is_local)
        session = self.lab.sessions.current
        return live_roofline(target, self.kept, server.metrics, server.devices, session.sweeps if session else None)

    # ---- what the loop asks of the lab -------------------------------------------------------------

    def _server(self, running: Running) -> Server:
        current = self.lab.sessions.current
        return Server(running.command, running.running, current.number if current else 0)

    def _for_screen(self, effects: Sequence[Effect]) -> list[ScreenEffect]:
        """The loop's effects, those on the lab and the live session done here, the IO left for the screen."""
        out: list[ScreenEffect] = []
        for effect in effects:
            match effect:
                case NewSession(reason):
                    out += [ForgetScrapes(), *self.lab.restarted((reason,), self.clock())]
                case CompareBefore(since_unix):
                    out += self.lab.compare_before(self.clock(), since_unix)
                case RunExperiment(vary):
                    out += self.lab.sweep(vary)
                case StartRestart(_, changes):
                    self.server_state = STARTING
                    self.server.restarting(changes)
                    out.append(effect)
                case _:
                    out.append(effect)
        return out
