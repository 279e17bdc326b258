"""The main screen's lab: server sessions across restarts, saved runs, the load dial, and the experiments.

`MainScreen` inherits this: its bindings join the main screen's (footer, help screen, palette), and its
handlers run beside the main screen's for the same messages (Textual calls each class's handler).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime

from textual import on
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen
from textual.timer import Timer

from tui.app.lab_feeds import LabFeedsMixin, runs_dir, save_quietly
from tui.app.lab_messages import LoadProgressed, LoadStopped, RunSaved, SessionIdentified
from tui.app.messages import GpuSampled, MetricsScraped, RequestCompleted, ServerCameUp
from tui.app.screens.compare import CompareScreen
from tui.app.screens.experiment import ExperimentScreen
from tui.app.screens.runs import RunsScreen
from tui.app.widgets.load_dial import DialState
from tui.core.experiments import make_plan
from tui.core.sessions import Session, compare_sessions, session_run
from tui.sources.detect import ServerInfo
from tui.sources.load import LoadDial, Workload

SAVE_DELAY_S = 10.0
"""A session is saved this long after a request finished: a burst is one write, and under steady streams
one write in this long (each rewrites up to 200 requests' offsets: at 32 streams, saving every second
cost the UI 7 % of a core). A restart or quit saves at once."""
LOAD_RATE = 2.0
LOAD_CONCURRENCY = 8
LOAD_RATES = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)
LOAD_CONCURRENCIES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""The dial's steps (256 is the HTTP client's connection pool)."""
LOAD_PROMPT_TOKENS = 200
LOAD_MAX_TOKENS = 64
LOAD_BACKLOG = 256
"""Arrivals waiting for a slot past this many pause the schedule: an endless load must not pile up without bound."""
EXPERIMENT_NAMES = {"prompt-tokens": "prompt-length sweep", "prefix": "prefix cache", "concurrency": "concurrency sweep",
                    "interference": "long-prompt interference", "context": "context growth"}


LAB_BINDINGS = [
    Binding("r", "runs", "Runs", tooltip="Saved runs: pick two to compare them", id="runs.open"),
    Binding("l", "toggle_load", "Load", id="load.toggle",
            tooltip="Start or stop a steady load (rate and concurrency on the dial); watch KV usage, queue and bandwidth"),
    Binding("b", "compare_before", "Compare with before", show=False, id="session.compare",
            tooltip="This server session against the one before the restart: config diff, TTFT, ITL, decode, bandwidth"),
    Binding("plus", "turn_rate(2.0)", "Load rate up", key_display="+", show=False,
            tooltip="Double the load's request rate", id="load.rate_up"),
    Binding("minus", "turn_rate(0.5)", "Load rate down", key_display="-", show=False,
            tooltip="Halve the load's request rate", id="load.rate_down"),
    Binding("right_square_bracket", "turn_concurrency(2.0)", "Load concurrency up", key_display="]", show=False,
            tooltip="Double the most requests the load keeps in flight", id="load.concurrency_up"),
    Binding("left_square_bracket", "turn_concurrency(0.5)", "Load concurrency down", key_display="[", show=False,
            tooltip="Halve the most requests the load keeps in flight", id="load.concurrency_down"),
    Binding("p", "sweep('prompt-tokens')", "Sweep: prompt length", show=False, id="sweep.prompt_length",
            tooltip="TTFT and decode rate against prompt length, 200 to 2,000 tokens"),
    Binding("x", "sweep('prefix')", "Sweep: prefix cache", show=False, id="sweep.prefix",
            tooltip="The same long system prompt sent twice, against a unique one"),
    Binding("n", "sweep('concurrency')", "Sweep: concurrency", show=False, id="sweep.concurrency",
            tooltip="Aggregate tok/s and p99 ITL against 1, 2, 4 … 32 streams at once"),
    Binding("i", "sweep('interference')", "Sweep: long-prompt interference", show=False, id="sweep.interference",
            tooltip="A 4,000-token prompt lands among 8 running streams: their ITL spikes"),
    Binding("g", "sweep('context')", "Sweep: context growth", show=False, id="sweep.context",
            tooltip="ITL against token position in one long generation (to 8,000 tokens)"),
]
"""The lab's keys, appended to the main screen's own (so the footer shows those first). Only l and r
take footer room; the rest are in the help screen and the palette, and the dial shows its own keys."""


class LabMixin(LabFeedsMixin, Screen):
    """Sessions, runs, load and experiments on the main screen. Needs `settings`, `server_url`, `_live`."""

    dial: reactive[DialState | None] = reactive(None, always_update=True)
    """The load dial's state; None until a load was started."""
    load_running: reactive[bool] = reactive(False, bindings=True)
    """A load is on: the dial's keys turn it."""
    has_before: reactive[bool] = reactive(False, bindings=True)
    """A session before the last restart is kept: "compare with before" has something to compare."""

    save_runs = True
    """False: nothing is saved (the UI's --no-save)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._sessions: list[Session] = []
        """The current session last, the one before it (if any) before it; older ones are dropped."""
        self._server_info: ServerInfo | None = None
        self._save_timer: Timer | None = None
        self._load_dial: LoadDial | None = None
        self._load_stop: threading.Event | None = None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return None if self.why_disabled(action) else True

    def why_disabled(self, action: str) -> str | None:
        """Why a key cannot act now (its binding is shown disabled, and pressing it says this), or None."""
        if action in ("turn_rate", "turn_concurrency") and not self.load_running:
            return "the load dial is off: press l to start it, then + - ] [ turn it"
        if action == "compare_before" and not self.has_before:
            return "nothing to compare with yet: b compares with the session before the server restarted"
        return None

    # ---- sessions -------------------------------------------------------------------------------

    @on(ServerCameUp)
    def _session_server_up(self, event: ServerCameUp) -> None:
        if not self._sessions:
            self._open_session(())
        elif self._sessions[-1].identity is None:
            self._identify()

    @on(MetricsScraped)
    def _session_metrics(self, event: MetricsScraped) -> None:
        snapshot = event.snapshot
        if snapshot.restart is not None and self._sessions:
            self._close_session()
            self._open_session(snapshot.restart.reasons)
            self.notify(f"server restarted ({'; '.join(snapshot.restart.reasons)}): session {self._sessions[-1].number} "
                        "begins. Press b to compare with before.", title="new session", markup=False, timeout=10)
        if self._sessions:
            self._sessions[-1].add_metrics(snapshot)

    @on(GpuSampled)
    def _session_gpu(self, event: GpuSampled) -> None:
        if self._sessions:
            self._sessions[-1].add_gpu(event.sample)

    @on(RequestCompleted)
    def _session_request(self, event: RequestCompleted) -> None:
        """A request belongs to the session it was sent in (one sent before a restart may end after it)."""
        sent = event.timing.t_sent_unix
        session = next((s for s in reversed(self._sessions) if s.started.timestamp() <= sent), None)
        if session is None:
            return
        session.add_request(event.timing)
        if session is self._sessions[-1] and self._save_timer is None and self._saving:
            self._save_timer = self.set_timer(SAVE_DELAY_S, self._save_current)

    @on(SessionIdentified)
    def _session_identified(self, event: SessionIdentified) -> None:
        for session in self._sessions:
            if session.number == event.number:
                session.identity = event.identity
        if self._sessions and event.number == self._sessions[-1].number:
            self._server_info = event.info
            self.simulator_flags = event.identity.get("simulator_flags")
            self._set_ceiling()

    @on(RunSaved)
    def _run_saved(self, event: RunSaved) -> None:
        if event.error:
            self.notify(event.error, title=f"{event.what}: run not saved", severity="warning", markup=False)
        elif event.what == "load":
            self.notify(f"saved run {event.run_id}", title="load", markup=False)

    def _open_session(self, reasons: tuple[str, ...]) -> None:
        number = self._sessions[-1].number + 1 if self._sessions else 1
        self._sessions = [*self._sessions[-1:], Session(number, datetime.now().astimezone(), self.server_url,
                                                        restart_reasons=tuple(reasons))]
        self.has_before = len(self._sessions) > 1
        self._server_info = None
        self._identify()

    def _close_session(self) -> None:
        """The current session ends: saved now if it has requests, kept as "before"."""
        if self._save_timer is not None:
            self._save_timer.stop()
            self._save_timer = None
        session = self._sessions[-1]
        if session.requests and self._saving:
            self.save_session_run(self._session_run(session), f"session {session.number}")

    def _save_current(self) -> None:
        self._save_timer = None
        session = self._sessions[-1]
        self.save_session_run(self._session_run(session), f"session {session.number}")

    def _session_run(self, session: Session) -> dict:
        if session.decode_ceiling_tok_s is None:
            session.decode_ceiling_tok_s = self.decode_ceiling_tok_s
        return session_run(session, datetime.now().astimezone())

    def _identify(self) -> None:
        if self._live:
            self.identify_session(self._sessions[-1].number)

    @property
    def _saving(self) -> bool:
        """Runs are saved by a live UI only: a recorded feed (tests, snapshots) writes nothing."""
        return self.save_runs and self._live

    def on_unmount(self) -> None:
        """A session's last requests may wait on the save timer: write them now, as the app closes.

        Here, not in a worker: workers are being cancelled, and one small file is written once.
        """
        if self._save_timer is not None:
            self._save_timer.stop()
            self._save_timer = None
            session = self._sessions[-1]
            save_quietly(self._session_run(session), self.settings, f"session {session.number}")

    # ---- actions --------------------------------------------------------------------------------

    def action_compare_before(self) -> None:
        before, after = self._sessions[-2:]
        if after.identity is None:
            self.notify("still reading the restarted server's flags: try again in a moment", severity="warning")
            return
        comparison = compare_sessions(self._session_run(before), self._session_run(after))
        self.app.push_screen(CompareScreen(comparison, f"Session {before.number} (before the restart) against "
                                                       f"session {after.number} (now)"))

    def action_runs(self) -> None:
        self.app.push_screen(RunsScreen(runs_dir(self.settings)))

    def action_sweep(self, vary: str) -> None:
        info = self._server_info
        if info is None:
            self.notify("the server is not known yet: wait for the header to say it is up", severity="warning")
            return
        try:
            plan = make_plan(vary, max_model_len=info.max_model_len)
        except ValueError as error:
            self.notify(str(error), title=f"{EXPERIMENT_NAMES[vary]} cannot run here", severity="error", markup=False)
            return
        self.app.push_screen(ExperimentScreen(plan, self.settings, self.server_url, info, self._saving,
                                             self.decode_ceiling_tok_s))

    def action_toggle_load(self) -> None:
        if self.load_running:
            if self._load_stop is not None:
                self._load_stop.set()
            self.dial = replace(self.dial, note="stopping: requests in flight finish…")
            return
        info = self._server_info
        if info is None:
            self.notify("the server is not known yet: wait for the header to say it is up", severity="warning")
            return
        previous = self.dial
        rate = previous.rate if previous else LOAD_RATE
        concurrency = previous.concurrency if previous else LOAD_CONCURRENCY
        self._load_dial = LoadDial(rate, concurrency)
        self._load_stop = threading.Event()
        self.load_running = True
        self.dial = DialState(running=True, rate=rate, concurrency=concurrency)
        workload = Workload(LOAD_PROMPT_TOKENS, LOAD_MAX_TOKENS, backlog=LOAD_BACKLOG,
                            exact_length=self.settings.exact_length)
        self.run_load(info, self._load_dial, workload, self._load_stop)

    def action_turn_rate(self, factor: float) -> None:
        rate = _step(LOAD_RATES, self.dial.rate, factor)
        self._load_dial.rate = rate
        self.dial = replace(self.dial, rate=rate)

    def action_turn_concurrency(self, factor: float) -> None:
        concurrency = int(_step(LOAD_CONCURRENCIES, self.dial.concurrency, factor))
        self._load_dial.concurrency = concurrency
        self.dial = replace(self.dial, concurrency=concurrency)

    @on(LoadProgressed)
    def _load_progressed(self, event: LoadProgressed) -> None:
        if self.dial is not None and self.load_running:
            self.dial = replace(self.dial, progress=event.progress, ttft_p50_s=event.ttft_p50_s, itl_p50_s=event.itl_p50_s,
                                bursts=event.bursts)

    @on(LoadStopped)
    def _load_stopped(self, event: LoadStopped) -> None:
        self.load_running = False
        if event.figures is not None:
            note = f"stopped: {event.figures['completed']} done at {event.figures['request_throughput'] or 0:.2f} req/s overall"
        else:
            note = "could not run"
        if event.error:
            note += f": {event.error}"
            self.notify(event.error, title="load", severity="error", markup=False)
        self.dial = replace(self.dial, running=False, note=note)


def _step(steps: tuple[float, ...], value: float, factor: float) -> float:
    """The next step up (factor > 1) or down from `value`, staying on the ladder's ends."""
    if factor > 1:
        return next((s for s in steps if s > value), steps[-1])
    return next((s for s in reversed(steps) if s < value), steps[0])


