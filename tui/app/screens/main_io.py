"""The main screen's IO, and the one place its effects run: the workers it starts at mount and stops at unmount,
what the core's state (`tui.core.state.main_state`) answers a fact or a key with (workers, timers, screens,
toasts), the sends, the load dial's load, the saves, and the screens its keys open.

`MainScreenIO` is the main screen's base: `MainScreen` composes the panes and routes each fact to the state, then
hands what came back to `run_effects`, which ends by showing the state (`show_state`, the subclass's)."""

from __future__ import annotations

import socket
import threading
from dataclasses import replace
from functools import partial
from time import monotonic

from textual import on
from textual.reactive import reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import Worker

from tui.app.feeds.lab import LoadDriver, identify_session, runs_dir, save_quietly
from tui.app.feeds.requests import RequestSender
from tui.app.feeds.samples import poll_gpu
from tui.app.feeds.server import find_server, poll_metrics
from tui.app.feeds.simulator import follow_simulator, restart_served, restart_simulator, start_served_again
from tui.app.feeds.traces import endpoint_of, serve_traces
from tui.app.messages import MeterDied
from tui.app.screens.compare import CompareScreen
from tui.app.screens.experiment import ExperimentScreen
from tui.app.screens.flags import FlagEditorScreen
from tui.app.screens.help import HelpScreen
from tui.app.screens.runs import RunsScreen
from tui.app.screens.server_log import ServerLogScreen
from tui.app.screens.traffic import TrafficScreen
from tui.app.traffic_messages import TraceReceiverStopped, TracesReceived, TracesTallied
from tui.app.widgets.gpu_pane import GpuPane
from tui.app.widgets.prompt_pane import AnswerView, PromptPane
from tui.app.widgets.timeline_pane import TimelinePane
from tui.app.worker_failures import report_failed_worker
from tui.config import Settings
from tui.core.measure.sends import Send
from tui.core.runs.run_record import compare_runs
from tui.core.state.effects import Notify
from tui.core.state.lab import (
    LOAD_BACKLOG,
    LOAD_MAX_TOKENS,
    LOAD_PROMPT_TOKENS,
    NOT_KNOWN_YET,
    DropSave,
    Identify,
    OpenComparison,
    OpenExperiment,
    SaveRun,
    SaveSoon,
    StartLoad,
    StopLoad,
    TurnLoad,
)
from tui.core.state.main_state import (
    ExitNote,
    FindServer,
    ForgetScrapes,
    MainState,
    MarkDown,
    Publish,
    Running,
    ScreenEffect,
    StartMeters,
)
from tui.core.state.tuning_loop import CompareRuns, Play, Refusal, ReopenEditor, RestartRequest, StartRestart
from tui.core.telemetry.served import TraceWindow
from tui.core.untrusted import one_line
from tui.core.view.traffic import take_traces
from tui.meter.pool import MeterPool
from tui.sources.host import local_port
from tui.sources.http import ServerClient, client_for
from tui.sources.scrape import MetricsScraper
from tui.sources.servers.served_command import ServedProcess
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sources.wall_clock import now_unix
from tui.sources.workloads.load import LoadDial, Workload


class MainScreenIO(Screen):
    """The IO of a screen whose state answers with effects: its attributes set by the subclass before any runs."""

    settings: Settings
    server_url: str
    live: bool
    """False: no workers start; tests and snapshots post the messages themselves."""
    state: MainState
    meters: MeterPool
    """The processes that read and stamp this screen's streams."""
    client: ServerClient | None = None
    """The server's JSON client (its identity, /metrics), made once the first frame is out."""
    scraper: MetricsScraper | None = None
    """What the /metrics poll reads through (made with the client)."""
    simulator: SimulatorProcess | None = None
    """The simulator phasetop started for this screen, if it did."""
    served: ServedProcess | None = None
    """The server command phasetop runs for this screen (`--serve`, or the simulator it started), if it does."""
    traces: socket.socket | None = None
    """The trace receiver's listening socket (`--otlp`, or the one phasetop's own simulator exports to), if any."""
    traffic: TraceWindow
    """Every request the server's spans told of, for the traffic view (fed by the trace receiver)."""

    simulator_state: reactive[str] = reactive("running", bindings=True)
    """The server phasetop runs, as `MainState.server_state` has it: its keys are enabled by it."""

    _save_timer: Timer | None = None
    _load_dial: LoadDial | None = None
    _load_stop: threading.Event | None = None

    def show_state(self) -> None:
        """The state into the reactives the panes are bound to (the subclass's)."""

    def publish_soon(self) -> None:
        """The timeline's state to the panes after the facts already queued (the subclass's)."""

    def mark_down(self, down: bool) -> None:
        for pane in self.query(".pane"):
            pane.set_class(down, "-down")

    @property
    def running(self) -> Running | None:
        """The command phasetop runs, as its process is now; None where it runs none."""
        served = self.served
        return Running(served.command, served.running) if served is not None else None

    _save_runs = True

    @property
    def save_runs(self) -> bool:
        """False: nothing is saved (the UI's --no-save); a recorded feed (tests, snapshots) saves nothing either."""
        return self._save_runs

    @save_runs.setter
    def save_runs(self, save: bool) -> None:
        self._save_runs = save
        self.state.lab.saving = save and self.live

    def on_mount(self) -> None:
        if not self.live:  # a recorded feed: every replot at once, so no timer is live at a snapshot
            self.client = client_for(self.settings, self.server_url)
            self.query_one(TimelinePane).replot_interval_s = 0.0
            self.query_one(AnswerView).write_interval_s = 0.0
            return
        # The first frame goes out before the client and the workers are made: the header shows at once.
        self.call_after_refresh(self._start_feeds)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report_failed_worker(self, event)

    def _start_feeds(self) -> None:
        self.client = client_for(self.settings, self.server_url)
        post = self.post_message
        self.run_worker(find_server(self.client, self.settings, self.server_url, post), group="server", exclusive=True,
                        exit_on_error=False)
        self.scraper = self.metrics_scraper()
        self.run_worker(poll_metrics(self.scraper, self.settings, self.server_url, post), group="metrics",
                        exclusive=True, exit_on_error=False)
        self.run_worker(partial(poll_gpu, self.settings, local_port(self.server_url), lambda: self.meters.cpu_pct, post),
                        group="gpu", exclusive=True, thread=True, exit_on_error=False)
        if self.simulator is not None:
            follow_simulator(self.simulator, self.post_message)
        if self.traces is not None:
            self.run_worker(partial(serve_traces, self.traces, post), group="traces", exclusive=True, thread=True,
                            exit_on_error=False)

    def metrics_scraper(self) -> MetricsScraper:
        """Where the metrics pane reads from: the server's own /metrics, over a rolling window of scrapes (one
        request's quantiles stay on the pane for the window, not one scrape)."""
        return MetricsScraper(self.client, window_s=self.settings.poll.metrics_window_s)

    async def on_unmount(self) -> None:
        # Here, not in a worker: workers are being cancelled, and one small file is written once.
        for save in self.state.lab.closing(self.state.clock()):
            save_quietly(save.run, self.settings, save.what)
        self.workers.cancel_all()
        self.meters.close()
        if self.client is not None:
            await self.client.aclose()

    # ---- the screens the keys open -----------------------------------------------------------------

    def action_help(self) -> None:
        keys = [(b.binding.key_display or b.binding.key, b.binding.description + ("" if b.enabled else " (not now)"))
                for b in self.active_bindings.values() if b.binding.description]
        self.app.push_screen(HelpScreen(keys))

    def action_start_server_again(self) -> None:
        self.state.starting_again()
        self.show_state()
        start = (partial(start_served_again, self.served) if self.served is not None
                 else partial(restart_simulator, self.simulator))
        self.run_worker(partial(start, self.post_message), group="served", exclusive=True, thread=True,
                        exit_on_error=False)

    def action_edit_flags(self) -> None:
        self.open_flag_editor()

    def action_server_log(self) -> None:
        served = self.served
        self.app.push_screen(ServerLogScreen(served.log_tail, f"Server log · {one_line(str(served.command), 160)}"))

    def action_runs(self) -> None:
        self.app.push_screen(RunsScreen(runs_dir(self.settings)))

    def action_traffic(self) -> None:
        receiving = endpoint_of(self.traces) if self.traces is not None else None
        save = (lambda run: self.run_effects([SaveRun(run, "traffic window")])) if self.save_runs else None
        self.app.push_screen(TrafficScreen(self.traffic, receiving, lambda: self.state.kept,
                                           lambda: self.state.server.metrics.histograms if self.state.server.metrics else {}, save,
                                           lambda: self.settings.poll.metrics_window_s))

    # ---- facts only the IO hears ------------------------------------------------------------------

    @on(TracesReceived)
    def _traces(self, event: TracesReceived) -> None:
        take_traces(self.traffic, event.records, event.server_spans, event.tally)

    @on(TracesTallied)
    def _traces_tallied(self, event: TracesTallied) -> None:
        take_traces(self.traffic, (), (), event.tally)

    @on(TraceReceiverStopped)
    def _receiver_stopped(self, event: TraceReceiverStopped) -> None:
        self.notify(event.reason, title="traffic", severity="error", markup=False)

    @on(MeterDied)
    def _meter_died(self, event: MeterDied) -> None:
        self.notify(f"{event.reason}; the next send starts a new one", title="meter restarted", severity="error",
                    markup=False)

    # ---- effects -------------------------------------------------------------------------------------

    def run_effects(self, effects: list[ScreenEffect]) -> None:
        """Run what the state asked for, then show the state."""
        for effect in effects:
            match effect:
                case Notify(message, title, severity, timeout):
                    self.notify(message, title=title, severity=severity, timeout=timeout, markup=False)
                case Publish():
                    self.publish_soon()
                case MarkDown(down):
                    self.mark_down(down)
                case ExitNote(what):
                    self.query_one(GpuPane).server_exit = what
                case StartMeters():
                    if self.live:  # the first send then finds its meter ready
                        self.meters.start()
                case FindServer():
                    if self.live:
                        self.run_worker(find_server(self.client, self.settings, self.server_url, self.post_message),
                                        group="server", exclusive=True, exit_on_error=False)
                case ForgetScrapes():
                    if self.scraper is not None:
                        self.scraper.forget()
                case SaveRun(run, what):  # bound now: a lambda would read the loop's last `run` when the thread runs
                    self.run_worker(partial(self._save_run, run, what), group="save", thread=True, exit_on_error=False)
                case SaveSoon(delay_s):
                    self._save_timer = self.set_timer(delay_s, self._save_due)
                case DropSave():
                    if self._save_timer is not None:
                        self._save_timer.stop()
                        self._save_timer = None
                case Identify(number):
                    if self.live:
                        self.run_worker(identify_session(self.client, self.settings, number, self.post_message),
                                        group="session", exclusive=True, exit_on_error=False)
                case StartLoad(rate, concurrency):
                    self._start_load(rate, concurrency)
                case StopLoad():
                    if self._load_stop is not None:
                        self._load_stop.set()
                case TurnLoad(rate, concurrency):
                    if self._load_dial is not None:
                        self._load_dial.rate, self._load_dial.concurrency = rate, concurrency
                case OpenComparison(comparison, title):
                    self.app.push_screen(CompareScreen(comparison, title))
                case OpenExperiment(plan):
                    self.app.push_screen(ExperimentScreen(plan, self.settings, self.server_url, self.state.lab.server_info,
                                                          self.state.lab.saving, self.meters.meter_for,
                                                          self.state.server.guard, self.experiment_ran))
                case StartRestart(command, _):
                    self.run_worker(partial(restart_served, self.served, command, self.post_message),
                                    group="served", exclusive=True, thread=True, exit_on_error=False)
                case Play(workload):
                    for after_s, send in workload:
                        self.set_timer(max(after_s, 0.001), partial(self._resend, send))
                case CompareRuns(before, after, title):
                    self.app.push_screen(CompareScreen(compare_runs(before, after), title))
                case ReopenEditor(refusal, rerun):
                    self.open_flag_editor(refusal, rerun)
        self.show_state()

    def send_requests(self, send: Send) -> Worker[None] | None:
        """Start `send` through the meters (see `tui.app.feeds.requests`); its answer shows in the prompt pane.
        None: the server is not known yet."""
        # one stamp for both, on the requests' own clock: a rerun's compare counts from the loop's, the session's by it
        served = self.state.sending(send, monotonic(), now_unix())
        if served is None or served.model is None:
            self.notify(NOT_KNOWN_YET, severity="warning")
            return None
        self.query_one(PromptPane).start_answer(f"── {send.label} ──")
        sender = RequestSender(self.settings, self.server_url, self.meters.meter_for, self.post_message)
        return self.run_worker(sender.send(send, served.api, served.model, bool(self.state.server.server_fresh)),
                               group="requests", exit_on_error=False)

    def open_flag_editor(self, refusal: Refusal | None = None, rerun: str | None = None) -> None:
        """The flag editor on the command running now, or again on a refused one (`refusal`: its error beside it)."""
        served = self.served
        self.app.push_screen(FlagEditorScreen(served.command, served.first, self.state.loop.reruns(), refusal, rerun),
                             self._edited)

    def experiment_ran(self, run: dict) -> None:
        self.run_effects(self.state.experiment_ran(run))

    def _edited(self, restart: RestartRequest | None) -> None:
        self.run_effects(self.state.edited(restart, self.running))

    def _save_due(self) -> None:
        self._save_timer = None
        self.run_effects(self.state.lab.save_due(self.state.clock()))

    def _resend(self, send: Send) -> None:
        again = replace(send, first_id=self.state.live.send(send.concurrency))
        sent = self.send_requests(again) is not None  # not when the server is not known (it says so)
        self.state.loop.resent(range(again.first_id, again.first_id + again.concurrency) if sent else None)

    def _save_run(self, run: dict, what: str) -> None:
        """In a thread worker: write `run`; the outcome comes back as a message."""
        self.post_message(save_quietly(run, self.settings, what))

    def _start_load(self, rate: float, concurrency: int) -> None:
        self._load_dial = LoadDial(rate, concurrency)
        self._load_stop = threading.Event()
        workload = Workload(LOAD_PROMPT_TOKENS, LOAD_MAX_TOKENS, backlog=LOAD_BACKLOG,
                            exact_length=self.settings.exact_length)
        driver = LoadDriver(self.settings, self.server_url, self.meters.meter_for, self.post_message, self.save_runs,
                            self.state.live.take_ids, self.state.server.guard)
        self.run_worker(partial(driver.run, self.state.lab.server_info, self._load_dial, workload, self._load_stop),
                        group="load", exclusive=True, thread=True, exit_on_error=False)
