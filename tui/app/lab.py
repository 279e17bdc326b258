"""The main screen's lab: server sessions across restarts, saved runs, the load dial, and the experiments.

Composed into the main screen, which routes the lab's keys and facts here: the sessions are a core value
(`SessionLog`), the dial's steps a core ladder, the workers plain functions in `tui.app.feeds.lab`; this
class joins them and sets the screen's lab state (`dial`, `load_running`, `has_before`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING

from textual.timer import Timer

from tui.app.feeds.lab import LoadDriver, identify_session, runs_dir, save_quietly
from tui.app.lab_messages import LoadProgressed, LoadStopped, RunSaved, SessionIdentified
from tui.app.screens.compare import CompareScreen
from tui.app.screens.experiment import ExperimentScreen
from tui.app.screens.runs import RunsScreen
from tui.app.widgets.load_dial import DialState
from tui.core.experiments import EXPERIMENT_NAMES, OWN_SIMULATORS, make_plan
from tui.core.load_steps import LOAD_CONCURRENCIES, LOAD_RATES, step
from tui.core.records import RequestTiming
from tui.core.sessions import Session, SessionLog, compare_sessions, session_run
from tui.core.telemetry import GpuSample, MetricsSnapshot
from tui.sources.detect import ServerInfo
from tui.sources.load import LoadDial, Workload

if TYPE_CHECKING:
    from tui.app.screens.main import MainScreen

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


class Lab:
    """Sessions, runs, load and experiments for one main screen (`screen`)."""

    def __init__(self, screen: MainScreen) -> None:
        self._screen = screen
        self.sessions = SessionLog(screen.server_url)
        self.server_info: ServerInfo | None = None
        """The current session's server, once identified: the load and the sweeps need it."""
        self._save_timer: Timer | None = None
        self._load_dial: LoadDial | None = None
        self._load_stop: threading.Event | None = None

    @property
    def _saving(self) -> bool:
        """Runs are saved by a live UI only: a recorded feed (tests, snapshots) writes nothing."""
        return self._screen.save_runs and self._screen.live

    def why_disabled(self, action: str) -> str | None:
        """Why a lab key cannot act now (its binding is shown disabled, and pressing it says this), or None."""
        if action in ("turn_rate", "turn_concurrency") and not self._screen.load_running:
            return "the load dial is off: press l to start it, then + - ] [ turn it"
        if action == "compare_before" and not self.sessions.has_before:
            return "nothing to compare with yet: b compares with the session before the server restarted"
        return None

    # ---- facts ----------------------------------------------------------------------------------

    def server_up(self) -> None:
        current = self.sessions.current
        if current is None:
            self._open_session(())
        elif current.identity is None:
            self._identify()

    def scraped(self, snapshot: MetricsSnapshot) -> None:
        if snapshot.restart is not None:
            self.restarted(snapshot.restart.reasons)
        if self.sessions.current:
            self.sessions.current.add_metrics(snapshot)

    def restarted(self, reasons: tuple[str, ...]) -> None:
        """The server restarted (its metrics say so, or phasetop restarted it): a new session begins."""
        if not self.sessions.current:
            return
        self._close_session()
        self._open_session(reasons)
        self._screen.notify(f"server restarted ({'; '.join(reasons)}): session {self.sessions.current.number} begins. "
                            "Press b to compare with before.", title="new session", markup=False, timeout=10)

    def gpu_sampled(self, sample: GpuSample) -> None:
        if self.sessions.current:
            self.sessions.current.add_gpu(sample)

    def request_completed(self, timing: RequestTiming) -> None:
        session = self.sessions.sent_in(timing.t_sent_unix)
        if session is None:
            return
        session.add_request(timing)
        if session is self.sessions.current and self._save_timer is None and self._saving:
            self._save_timer = self._screen.set_timer(SAVE_DELAY_S, self._save_current)

    def identified(self, event: SessionIdentified) -> None:
        if self.sessions.identified(event.number, event.identity):
            self.server_info = event.info
            self._screen.state.identified(event.identity.get("simulator_flags"))

    def run_saved(self, event: RunSaved) -> None:
        if event.error:
            self._screen.notify(event.error, title=f"{event.what}: run not saved", severity="warning", markup=False)
        elif event.what == "load":
            self._screen.notify(f"saved run {event.run_id}", title="load", markup=False)

    def load_progressed(self, event: LoadProgressed) -> None:
        screen = self._screen
        if screen.dial is not None and screen.load_running:
            screen.dial = replace(screen.dial, progress=event.progress, ttft_p50_s=event.ttft_p50_s,
                                  itl_p50_s=event.itl_p50_s, bursts=event.bursts)

    def load_stopped(self, event: LoadStopped) -> None:
        screen = self._screen
        screen.load_running = False
        if event.figures is not None:
            note = f"stopped: {event.figures['completed']} done at {event.figures['request_throughput'] or 0:.2f} req/s overall"
        else:
            note = "could not run"
        if event.error:
            note += f": {event.error}"
            screen.notify(event.error, title="load", severity="error", markup=False)
        screen.dial = replace(screen.dial, running=False, note=note)

    def closing(self) -> None:
        """A session's last requests may wait on the save timer: write them now, as the screen closes.

        Here, not in a worker: workers are being cancelled, and one small file is written once."""
        if self._save_timer is not None:
            self._save_timer.stop()
            self._save_timer = None
            session = self.sessions.current
            save_quietly(self._session_run(session), self._screen.settings, f"session {session.number}")

    # ---- sessions -------------------------------------------------------------------------------

    def _open_session(self, reasons: tuple[str, ...]) -> None:
        self.sessions.open(datetime.now().astimezone(), reasons)
        self._screen.has_before = self.sessions.has_before
        self.server_info = None
        self._identify()

    def _close_session(self) -> None:
        """The current session ends: saved now if it has requests, kept as "before"."""
        if self._save_timer is not None:
            self._save_timer.stop()
            self._save_timer = None
        session = self.sessions.current
        if session.requests and self._saving:
            self._save(session)

    def _save_current(self) -> None:
        self._save_timer = None
        self._save(self.sessions.current)

    def _save(self, session: Session) -> None:
        run, settings, post = self._session_run(session), self._screen.settings, self._screen.post_message
        self._screen.run_worker(lambda: post(save_quietly(run, settings, f"session {session.number}")),
                                group="save", thread=True, exit_on_error=False)

    def _session_run(self, session: Session) -> dict:
        if session.decode_ceiling_tok_s is None:
            session.decode_ceiling_tok_s = self._screen.state.decode_ceiling_tok_s
        return session_run(session, datetime.now().astimezone())

    def _identify(self) -> None:
        screen = self._screen
        if screen.live:
            screen.run_worker(identify_session(screen.client, screen.settings, self.sessions.current.number,
                                               screen.post_message), group="session", exclusive=True, exit_on_error=False)

    # ---- keys -----------------------------------------------------------------------------------

    def compare_before(self, since_unix: float | None = None) -> None:
        """This session against the one before the restart; with `since_unix`, the one before counts only its
        requests sent from then on (the workload a restart ran again), so both sides ran the same."""
        before, after = self.sessions.sessions[-2:]
        if after.identity is None:
            self._screen.notify("still reading the restarted server's flags: try again in a moment", severity="warning")
            return
        before_run = self._session_run(before)
        if since_unix is not None:
            before_run["requests"] = [r for r in before_run["requests"] if r["t_sent_unix"] >= since_unix]
        comparison = compare_sessions(before_run, self._session_run(after))
        same = " (the same workload on both)" if since_unix is not None else ""
        self._screen.app.push_screen(CompareScreen(comparison, f"Session {before.number} (before the restart) against "
                                                               f"session {after.number} (now){same}"))

    def open_runs(self) -> None:
        self._screen.app.push_screen(RunsScreen(runs_dir(self._screen.settings)))

    def sweep(self, vary: str, on_run: Callable[[dict], None] | None = None) -> None:
        """Open the experiment `vary` on the current server; `on_run` gets its run (saved or not) when it ends."""
        screen, info = self._screen, self.server_info
        own = vary in OWN_SIMULATORS  # it starts phasetop's simulator in each of its setups: no server needed
        if info is None and not own:
            screen.notify(NOT_KNOWN_YET, severity="warning")
            return
        try:
            plan = make_plan(vary, max_model_len=None if own else info.max_model_len)
        except ValueError as error:
            screen.notify(str(error), title=f"{EXPERIMENT_NAMES[vary]} cannot run here", severity="error", markup=False)
            return
        screen.app.push_screen(ExperimentScreen(plan, screen.settings, screen.server_url, info, self._saving,
                                                screen.meters.meter_for, screen.state.decode_ceiling_tok_s, on_run))

    def toggle_load(self) -> None:
        screen = self._screen
        if screen.load_running:
            if self._load_stop is not None:
                self._load_stop.set()
            screen.dial = replace(screen.dial, note="stopping: requests in flight finish…")
            return
        info = self.server_info
        if info is None:
            screen.notify(NOT_KNOWN_YET, severity="warning")
            return
        previous = screen.dial
        rate = previous.rate if previous else LOAD_RATE
        concurrency = previous.concurrency if previous else LOAD_CONCURRENCY
        self._load_dial = LoadDial(rate, concurrency)
        self._load_stop = threading.Event()
        screen.load_running = True
        screen.dial = DialState(running=True, rate=rate, concurrency=concurrency)
        workload = Workload(LOAD_PROMPT_TOKENS, LOAD_MAX_TOKENS, backlog=LOAD_BACKLOG, exact_length=screen.settings.exact_length)
        driver = LoadDriver(screen.settings, screen.server_url, screen.meters.meter_for, screen.post_message, screen.save_runs,
                            screen.state.take_ids)
        screen.run_worker(partial(driver.run, info, self._load_dial, workload, self._load_stop),
                          group="load", exclusive=True, thread=True, exit_on_error=False)

    def turn_rate(self, factor: float) -> None:
        rate = step(LOAD_RATES, self._screen.dial.rate, factor)
        self._load_dial.rate = rate
        self._screen.dial = replace(self._screen.dial, rate=rate)

    def turn_concurrency(self, factor: float) -> None:
        concurrency = int(step(LOAD_CONCURRENCIES, self._screen.dial.concurrency, factor))
        self._load_dial.concurrency = concurrency
        self._screen.dial = replace(self._screen.dial, concurrency=concurrency)
