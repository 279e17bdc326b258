"""The main screen's lab as a state machine: server sessions across restarts, the load dial, before → after and
the experiments a key opens.

Each event (a fact from a feed, a key) changes the state and returns the effects the screen runs: notify, save a
run now or soon, identify a session's server, start, turn or stop the load, open a comparison or an experiment.
No IO and no clock: the screen passes `now`, so every path is a plain call in a test. The screen binds its view
to `dial`, `load_running` and `has_before` after each event."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from tui.core.experiments.plans import EXPERIMENT_NAMES, OWN_SIMULATORS, Plan, make_plan
from tui.core.measure.load_steps import LOAD_CONCURRENCIES, LOAD_RATES, LoadProgress, step
from tui.core.measure.records import RequestTiming
from tui.core.measure.sends import Send
from tui.core.runs.sessions import Session, SessionLog, compare_sessions, session_run
from tui.core.state.effects import Notify
from tui.core.telemetry.readings import GpuSample, MetricsSnapshot

SAVE_DELAY_S = 10.0
"""A session is saved this long after a request finished: a burst is one write, and under steady streams
one write in this long (each rewrites up to 200 requests' offsets: at 32 streams, saving every second
cost the UI 7 % of a core). A restart or quit saves at once."""
LOAD_RATE = 2.0
LOAD_CONCURRENCY = 8
LOAD_PROMPT_TOKENS = 200
LOAD_MAX_TOKENS = 64
LOAD_BACKLOG = 256
"""Arrivals waiting for a slot past this many pause the schedule: an endless load must not pile up without bound."""
NOT_KNOWN_YET = "the server is not known yet: wait for the header to say it is up"
DIAL_OFF = "the load dial is off: press l to start it, then + - ] [ turn it"

SESSION = "session"
"""What a UI session's own save is called ("session 2"): it saves on a timer, quietly; every save a person asked for
(the load, a traffic window) says "saved run …"."""


@dataclass(frozen=True, slots=True)
class DialState:
    """What the load dial shows."""

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


# ---- effects: what the screen does ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SaveRun:
    """Write `run` to the runs dir (`what` names it in a note if that fails)."""

    run: dict[str, Any]
    what: str


@dataclass(frozen=True, slots=True)
class SaveSoon:
    """Call `save_due` in `delay_s` (one timer at a time: the lab asks again only after it fired or was dropped)."""

    delay_s: float


@dataclass(frozen=True, slots=True)
class DropSave:
    """The timer `SaveSoon` set is no longer wanted."""


@dataclass(frozen=True, slots=True)
class Identify:
    """Read session `number`'s server: who it is, its config and flags (answered by `identified`)."""

    number: int


@dataclass(frozen=True, slots=True)
class StartLoad:
    """Start the endless load at `rate` requests a second, at most `concurrency` in flight."""

    rate: float
    concurrency: int


@dataclass(frozen=True, slots=True)
class StopLoad:
    """Stop sending; the requests in flight finish (answered by `load_stopped`)."""


@dataclass(frozen=True, slots=True)
class TurnLoad:
    """The running load's knobs, turned."""

    rate: float
    concurrency: int


@dataclass(frozen=True, slots=True)
class OpenComparison:
    comparison: dict[str, Any]
    title: str


@dataclass(frozen=True, slots=True)
class OpenExperiment:
    """Open the experiment screen on `plan` (on the current server, or on the simulators it starts itself)."""

    plan: Plan


LabEffect = Notify | SaveRun | SaveSoon | DropSave | Identify | StartLoad | StopLoad | TurnLoad | OpenComparison | OpenExperiment


class Lab:
    """Sessions, the load dial and the lab's keys for one server (`url`); `saving`: runs are written (a live UI
    that was not told --no-save)."""

    def __init__(self, url: str, saving: bool) -> None:
        self.sessions = SessionLog(url)
        self.saving = saving
        self.server_info: object | None = None
        """The current session's server as the sources describe it (opaque here), once identified: the load
        and the experiments address it."""
        self.max_model_len: int | None = None
        self.dial: DialState | None = None
        """None until a load was started."""
        self._save_pending = False

    @property
    def load_running(self) -> bool:
        return self.dial is not None and self.dial.running

    @property
    def has_before(self) -> bool:
        return self.sessions.has_before

    def why_disabled(self, action: str) -> str | None:
        """Why a lab key cannot act now (its binding is shown disabled, and pressing it says this), or None."""
        if action in ("turn_rate", "turn_concurrency") and not self.load_running:
            return DIAL_OFF
        if action == "compare_before" and not self.sessions.has_before:
            return "nothing to compare with yet: b compares with the session before the server restarted"
        return None

    # ---- facts ----------------------------------------------------------------------------------

    def server_up(self, now: datetime) -> list[LabEffect]:
        current = self.sessions.current
        if current is None:
            return self._open_session((), now)
        return [Identify(current.number)] if current.identity is None else []

    def scraped(self, snapshot: MetricsSnapshot, now: datetime) -> list[LabEffect]:
        effects = self.restarted(snapshot.restart.reasons, now) if snapshot.restart is not None else []
        if self.sessions.current:
            self.sessions.current.add_metrics(snapshot)
        return effects

    def restarted(self, reasons: tuple[str, ...], now: datetime) -> list[LabEffect]:
        """The server restarted (its metrics say so, or phasetop restarted it): a new session begins."""
        if not self.sessions.current:
            return []
        effects = self._close_session(now)
        effects += self._open_session(reasons, now)
        return effects + [Notify(f"server restarted ({'; '.join(reasons)}): session {self.sessions.current.number} "
                                 "begins. Press b to compare with before.", "new session", timeout=10)]

    def ceiling_known(self, decode_ceiling_tok_s: float | None) -> None:
        """The live session's ceiling for the current server (given, or derived once its model and device are
        known): the current session's run keeps it."""
        if self.sessions.current and decode_ceiling_tok_s is not None:
            self.sessions.current.decode_ceiling_tok_s = decode_ceiling_tok_s

    def experiment_ran(self, run: dict[str, Any]) -> None:
        """An experiment's run finished: on the current server (not phasetop's own simulators), its rows are that
        session's last sweep of it; a sweep of the server before a restart is not the new one's."""
        vary = run["params"]["vary"]
        if self.sessions.current and vary not in OWN_SIMULATORS:
            self.sessions.current.sweeps[vary] = run["result"]["rows"]

    def gpu_sampled(self, sample: GpuSample) -> None:
        if self.sessions.current:
            self.sessions.current.add_gpu(sample)

    def sent(self, send: Send, sent_unix: float) -> None:
        """The UI sent `send` (a preset's key, a typed prompt, a rerun): the current session's workload. `sent_unix`:
        the clock the tuning loop's `since_unix` is read from, so a rerun's first send counts in its own compare."""
        if self.sessions.current:
            self.sessions.current.add_send(send, sent_unix)

    def request_completed(self, timing: RequestTiming) -> list[LabEffect]:
        session = self.sessions.sent_in(timing.t_sent_unix)
        if session is None:
            return []
        session.add_request(timing)
        if session is self.sessions.current and not self._save_pending and self.saving:
            self._save_pending = True
            return [SaveSoon(SAVE_DELAY_S)]
        return []

    def identified(self, number: int, identity: dict[str, Any], info: object, max_model_len: int | None) -> bool:
        """Session `number`'s server was read; True when it is the current session's (the screen then knows it)."""
        if not self.sessions.identified(number, identity):
            return False
        self.server_info, self.max_model_len = info, max_model_len
        return True

    def run_saved(self, what: str, run_id: str | None, error: str | None) -> list[LabEffect]:
        if error:
            return [Notify(error, f"{what}: run not saved", "warning")]
        return [] if what.startswith(SESSION) else [Notify(f"saved run {run_id}", what)]

    def save_due(self, now: datetime) -> list[LabEffect]:
        """The save timer fired: the current session is written."""
        self._save_pending = False
        current = self.sessions.current
        return [self._save(current, now)] if current is not None else []

    def closing(self, now: datetime) -> list[SaveRun]:
        """The screen closes: a session's last requests waiting on the save timer are written now (the screen
        writes them at once, not in a worker: workers are being cancelled)."""
        if not self._save_pending:
            return []
        self._save_pending = False
        current = self.sessions.current
        return [self._save(current, now)] if current is not None else []

    # ---- the load dial --------------------------------------------------------------------------

    def toggle_load(self) -> list[LabEffect]:
        if self.dial is not None and self.dial.running:
            self.dial = replace(self.dial, note="stopping: requests in flight finish…")
            return [StopLoad()]
        if self.server_info is None:
            return [Notify(NOT_KNOWN_YET, "", "warning")]
        rate = self.dial.rate if self.dial else LOAD_RATE
        concurrency = self.dial.concurrency if self.dial else LOAD_CONCURRENCY
        self.dial = DialState(running=True, rate=rate, concurrency=concurrency)
        return [StartLoad(rate, concurrency)]

    def turn_rate(self, factor: float) -> list[LabEffect]:
        if self.dial is None or not self.dial.running:
            return [Notify(DIAL_OFF, "", "warning")]
        self.dial = replace(self.dial, rate=step(LOAD_RATES, self.dial.rate, factor))
        return [TurnLoad(self.dial.rate, self.dial.concurrency)]

    def turn_concurrency(self, factor: float) -> list[LabEffect]:
        if self.dial is None or not self.dial.running:
            return [Notify(DIAL_OFF, "", "warning")]
        self.dial = replace(self.dial, concurrency=int(step(LOAD_CONCURRENCIES, self.dial.concurrency, factor)))
        return [TurnLoad(self.dial.rate, self.dial.concurrency)]

    def load_progressed(self, progress: LoadProgress, ttft_p50_s: float | None, itl_p50_s: float | None,
                        bursts: int) -> None:
        if self.dial is not None and self.dial.running:
            self.dial = replace(self.dial, progress=progress, ttft_p50_s=ttft_p50_s, itl_p50_s=itl_p50_s, bursts=bursts)

    def load_stopped(self, figures: dict[str, Any] | None, error: str | None) -> list[LabEffect]:
        if figures is not None:
            note = f"stopped: {figures['completed']} done at {figures['request_throughput'] or 0:.2f} req/s overall"
        else:
            note = "could not run"
        if error:
            note += f": {error}"
        if self.dial is not None:
            self.dial = replace(self.dial, running=False, note=note)
        return [Notify(error, "load", "error")] if error else []

    # ---- keys -----------------------------------------------------------------------------------

    def compare_before(self, now: datetime, since_unix: float | None = None) -> list[LabEffect]:
        """This session against the one before the restart; with `since_unix`, the one before counts only its
        requests sent from then on (the workload a restart ran again), so both sides ran the same."""
        before, after = self.sessions.sessions[-2:]
        if after.identity is None:
            return [Notify("still reading the restarted server's flags: try again in a moment", "", "warning")]
        comparison = compare_sessions(session_run(before, now, since_unix), session_run(after, now))
        same = " (the same workload on both)" if since_unix is not None else ""
        return [OpenComparison(comparison, f"Session {before.number} (before the restart) against session "
                                           f"{after.number} (now){same}")]

    def sweep(self, vary: str) -> list[LabEffect]:
        """The experiment `vary` on the current server (or on phasetop's own simulators, where it starts them)."""
        own = vary in OWN_SIMULATORS
        if self.server_info is None and not own:
            return [Notify(NOT_KNOWN_YET, "", "warning")]
        try:
            plan = make_plan(vary, max_model_len=None if own else self.max_model_len)
        except ValueError as error:
            return [Notify(str(error), f"{EXPERIMENT_NAMES[vary]} cannot run here", "error")]
        return [OpenExperiment(plan)]

    # ---- sessions -------------------------------------------------------------------------------

    def _open_session(self, reasons: tuple[str, ...], now: datetime) -> list[LabEffect]:
        session = self.sessions.open(now, reasons)
        self.server_info = self.max_model_len = None
        return [Identify(session.number)]

    def _close_session(self, now: datetime) -> list[LabEffect]:
        """The current session ends: saved now if it has requests, kept as "before"."""
        effects: list[LabEffect] = [DropSave()] if self._save_pending else []
        self._save_pending = False
        session = self.sessions.current
        if session is not None and session.requests and self.saving:
            effects.append(self._save(session, now))
        return effects

    def _save(self, session: Session, now: datetime) -> SaveRun:
        return SaveRun(session_run(session, now), f"{SESSION} {session.number}")
