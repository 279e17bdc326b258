"""The one screen: token timeline, prompt, server metrics, GPU/host, and the status line.

A thin composer and router: the workers (`tui.app.feeds`) post facts, the handlers hand them to the core's
state — the live session (`tui.core.state.live`), the lab (`tui.core.state.lab`) and the tuning loop (`tui.core.state.tuning_loop`)
— and copy what they publish into the reactives the panes are bound to. The lab and the loop answer with
effects; `_run` is the one place they become workers, timers, screens and toasts."""

from __future__ import annotations

import socket
import threading
from dataclasses import replace
from datetime import datetime
from functools import partial
from time import monotonic, time

from textual import events, on
from textual.app import ComposeResult
from textual.containers import Container, Vertical
from textual.reactive import reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer
from textual.worker import Worker

from tui.app.feeds.lab import LoadDriver, identify_session, runs_dir, save_quietly
from tui.app.feeds.requests import RequestSender
from tui.app.feeds.samples import poll_gpu
from tui.app.feeds.server import find_server, poll_metrics
from tui.app.feeds.simulator import follow_simulator, restart_served, restart_simulator, start_served_again
from tui.app.feeds.traces import endpoint_of, serve_traces
from tui.app.layout import NARROW_WIDTH, SHORT_HEIGHT
from tui.app.lab_messages import LoadProgressed, LoadStopped, RunSaved, SessionIdentified
from tui.app.messages import (ClientSampled, GpuSampled, HostSampled, MeterDied, MetricsScraped, MetricsUnavailable,
                              NotSent, RequestCompleted, RequestStarted, ServedProgress, ServedRestarted, ServerCameUp,
                              ServerWentDown, SimulatorExited, SimulatorRestarted, TokenBatch)
from tui.app.screens.compare import CompareScreen
from tui.app.screens.experiment import ExperimentScreen
from tui.app.screens.flags import FlagEditorScreen
from tui.app.screens.help import HelpScreen
from tui.app.screens.roofline import RooflineScreen
from tui.app.screens.main_keys import MAIN_BINDINGS
from tui.app.screens.runs import RunsScreen
from tui.app.screens.server_log import ServerLogScreen
from tui.app.screens.traffic import TrafficScreen
from tui.app.traffic_messages import TraceReceiverStopped, TracesReceived, TracesTallied
from tui.app.widgets.gpu_pane import GpuPane
from tui.app.widgets.load_dial import LoadDialPane
from tui.app.widgets.metrics_pane import MetricsPane
from tui.app.widgets.prompt_pane import PRESETS, TYPED_MAX_TOKENS, AnswerView, PromptPane
from tui.app.widgets.status_line import StatusLine
from tui.app.widgets.timeline_pane import TimelinePane
from tui.app.worker_failures import report_failed_worker
from tui.config import Settings
from tui.core.measure.client_load import CLIENT_BUSY_PCT, busy_line
from tui.core.state.effects import Notify
from tui.core.state.lab import (LOAD_BACKLOG, LOAD_MAX_TOKENS, LOAD_PROMPT_TOKENS, NOT_KNOWN_YET, DialState, DropSave,
                          Identify, Lab, LabEffect, OpenComparison, OpenExperiment, SaveRun, SaveSoon, StartLoad, StopLoad,
                          TurnLoad)
from tui.core.view.lane_figures import NEWEST
from tui.core.view.timeline import Lane
from tui.core.state.live import LiveSession, Served
from tui.core.state.server_state import ServerState
from tui.core.measure.records import RequestTiming
from tui.core.hardware.roofline_live import LiveRoofline, live_roofline, live_target
from tui.core.runs.run_record import compare_runs
from tui.core.measure.sends import Send
from tui.core.telemetry.served import TraceWindow
from tui.core.telemetry.readings import GpuSample, HostSample, MetricsSnapshot
from tui.core.view.timeline import KEEP_LANES
from tui.core.view.traffic import take_traces
from tui.core.state.tuning_loop import (CompareBefore, CompareRuns, Effect, NewSession, Play, Refusal, ReopenEditor,
                                        RestartRequest, RunExperiment, Server, StartRestart, TuningLoop,
                                        restart_key_disabled)
from tui.core.untrusted import one_line
from tui.meter.pool import MeterPool, default_meters
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sources.host import local_port
from tui.sources.http import ServerClient, client_for
from tui.sources.workloads.load import LoadDial, Workload
from tui.sources.scrape import MetricsScraper
from tui.sources.servers.served_command import ServedProcess

PUBLISH_INTERVAL_S = 1 / 8
"""State reaches the panes at most this often (the frame budget): at 32 streams a batch lands every 50 ms,
and painting each one cost the main thread more than reading the streams did."""
PROBE = (("concurrent", 0.0), ("long", 1.0))
"""The fixed probe a restart can run (preset key, seconds after the first): 8 streams, and a second later the
long prompt lands among them: both phases and their interference, the same on every restart."""


def probe() -> list[tuple[float, Send]]:
    """The probe's sends, each with its time after the first (ids are given as each is sent)."""
    return [(after_s, next(p for p in PRESETS if p.key == key).send(0)) for key, after_s in PROBE]

BROUGHT_S = 1.5
"""How long a pane a key brought into view keeps its marked border."""


class MainScreen(Screen):
    """Routes facts to the live session and the lab; panes receive the state through data_bind and render it."""

    BINDINGS = MAIN_BINDINGS

    # The screen draws nothing itself (panes get these through data_bind): repaint=True would redraw
    # the whole screen on every sample and every token batch.
    timings: reactive[list[RequestTiming]] = reactive(list, always_update=True, repaint=False)
    """Requests finished and in flight, oldest first."""
    batch_of: reactive[list[int]] = reactive(list, always_update=True, repaint=False)
    """One batch number per request in `timings` (the load dial's each alone)."""
    lanes: reactive[list[Lane]] = reactive(list, always_update=True, repaint=False)
    """The newest of `timings` as the timeline keeps them, labelled, their gaps judged."""
    metrics: reactive[MetricsSnapshot | None] = reactive(None, always_update=True, repaint=False)
    """The latest /metrics snapshot."""
    gpu: reactive[GpuSample | None] = reactive(None, always_update=True, repaint=False)
    host: reactive[HostSample | None] = reactive(None, always_update=True, repaint=False)
    server: reactive[ServerState | None] = reactive(None, always_update=True, repaint=False)
    """The server as last seen: up, or down since when."""
    decode_ceiling_tok_s: reactive[float | None] = reactive(None, repaint=False)
    ceiling_factor: reactive[float | None] = reactive(None, repaint=False)
    """The single-stream ceiling for the server's model and device, when both are known."""
    diagnosis: reactive[str] = reactive("", repaint=False)
    """The "what to change" findings of the selected request, one per line ("in flight" until it ends)."""
    selected_back: reactive[int] = reactive(NEWEST, repaint=False)
    """The lane the figures under the timeline speak of, counted back from the newest (0); a send resets it."""
    client_busy: reactive[str] = reactive("", repaint=False)
    """"client busy: N % CPU, figures marked" while a meter process is near a core; "" otherwise."""
    cpu_ceiling: reactive[str | None] = reactive(None, repaint=False)
    """How the ceiling of a server phasetop did not start was derived (its GPU, or the CPU row), or why
    there is none ("ceiling: unknown model …"); shown in the GPU/host pane."""
    dial: reactive[DialState | None] = reactive(None, always_update=True)
    """The load dial's state; None until a load was started."""
    load_running: reactive[bool] = reactive(False, bindings=True)
    """A load is on: the dial's keys turn it."""
    has_before: reactive[bool] = reactive(False, bindings=True)
    """A session before the last restart is kept: "compare with before" has something to compare."""
    simulator_state: reactive[str] = reactive("running", bindings=True)
    """The server phasetop runs (its simulator, or the --serve command): "running", "exited" (without being asked:
    R restarts the simulator) or "starting" (again)."""

    simulator: SimulatorProcess | None = None
    """The simulator phasetop started for this screen, if it did."""
    served: ServedProcess | None = None
    """The server command phasetop runs for this screen (`--serve`, or the simulator it started), if it does."""
    traces: socket.socket | None = None
    """The trace receiver's listening socket (`--otlp`, or the one phasetop's own simulator exports to), if any."""

    def __init__(self, settings: Settings, server_url: str, simulated: str | None = None,
                 ceiling: tuple[float, float, float] | None = None, live: bool = True) -> None:
        super().__init__()
        self.settings = settings
        """Everything configured; the API key stays inside the HTTP client."""
        self.server_url = server_url
        self.live = live
        """False: no workers start; tests and snapshots post the messages themselves."""
        self.state = LiveSession(ceiling, local_port(server_url) is not None, settings.bandwidth_gbs,
                                 ServerState(url=server_url, simulated=simulated))
        """The requests, the server and what is said of them."""
        self._save_runs = True
        self.lab = Lab(server_url, saving=live)
        """Sessions, runs, the load dial and the experiments' keys (`tui.core.state.lab`)."""
        self.loop = TuningLoop(probe())
        """Restarts of the server phasetop serves with new flags, and what runs again after them."""
        self._save_timer: Timer | None = None
        self._load_dial: LoadDial | None = None
        self._load_stop: threading.Event | None = None
        self.meters = MeterPool(settings.meters or default_meters(KEEP_LANES, renders=True),
                                on_ended=lambda reason: self.post_message(MeterDied(reason)))
        """The processes that read and stamp this screen's streams (started with the first, or once the server is up)."""
        self._publish_pending = False
        self._published_at = 0.0
        self._publish_interval_s = PUBLISH_INTERVAL_S if live else 0.0
        """A recorded feed (tests, snapshots) publishes after each message: no timer is live at a snapshot."""
        self.server = self.state.server
        self.decode_ceiling_tok_s = self.state.decode_ceiling_tok_s
        self.client: ServerClient | None = None
        """The server's JSON client (its identity, /metrics), made once the first frame is out."""
        self.scraper: MetricsScraper | None = None
        """What the /metrics poll reads through (made with the client)."""
        self.traffic = TraceWindow()
        """Every request the server's spans told of, for the traffic view (fed by the trace receiver)."""
        self.kept_timings: list[RequestTiming] = []
        """Every request kept, those `c` cleared from the timeline too (the roofline and the traffic view read them)."""
        self.roofline: RooflineScreen | None = None
        """The roofline screen while it is open: it is handed each new state."""

    @property
    def save_runs(self) -> bool:
        """False: nothing is saved (the UI's --no-save); a recorded feed (tests, snapshots) saves nothing either."""
        return self._save_runs

    @save_runs.setter
    def save_runs(self, save: bool) -> None:
        self._save_runs = save
        self.lab.saving = save and self.live

    def compose(self) -> ComposeResult:
        yield StatusLine(id="status").data_bind(state=MainScreen.server)
        # Only the panes scroll (stacked on a narrow terminal): the status line above and the footer stay.
        with Container(id="panes"):
            # The timeline first: the whole top row (stacked: the top pane), the split is what this screen shows.
            yield TimelinePane(id="timeline-pane", classes="pane").data_bind(
                timings=MainScreen.timings, lanes=MainScreen.lanes, batch_of=MainScreen.batch_of,
                decode_ceiling_tok_s=MainScreen.decode_ceiling_tok_s, ceiling_factor=MainScreen.ceiling_factor,
                diagnosis=MainScreen.diagnosis, client_busy=MainScreen.client_busy, selected_back=MainScreen.selected_back)
            prompt = PromptPane(id="prompt-pane", classes="pane")
            prompt.border_title = "Prompt"
            yield prompt
            with Vertical(id="telemetry"):  # the server's metrics over the GPU/host pane, beside the prompt
                metrics = MetricsPane(id="metrics-pane", classes="pane").data_bind(snapshot=MainScreen.metrics)
                metrics.border_title = "Server metrics"
                yield metrics
                gpu = GpuPane(id="gpu-pane", classes="pane").data_bind(gpu=MainScreen.gpu, host=MainScreen.host,
                                                                      cpu_ceiling=MainScreen.cpu_ceiling,
                                                                      metrics=MainScreen.metrics)
                gpu.border_title = "GPU / host"
                yield gpu
        yield LoadDialPane(id="load-dial").data_bind(state=MainScreen.dial)
        yield Footer()

    def on_key(self, event: events.Key) -> None:
        """Typing at once writes a prompt: a printable key no shortcut takes, pressed outside the prompt box, opens
        it with that character (a sentence typed at the start lands there, not in the experiments' keys).

        The keys typed after it in one burst reach this screen too, not the box (the app hands each key on as it
        reads it, before this screen has moved the focus): once the box has the focus, a printable key arriving
        here is one of those, and goes into the box in its order (the box takes every key typed into it)."""
        if not event.is_printable:
            return
        if self.focused is not self.query_one("#prompt-text") and event.key in self.app.active_bindings:
            return  # a shortcut, or one that says why it cannot act now
        event.stop()
        event.prevent_default()
        self.query_one(PromptPane).type_into(event.character)

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
        for save in self.lab.closing(datetime.now().astimezone()):
            save_quietly(save.run, self.settings, save.what)
        self.workers.cancel_all()
        self.meters.close()
        if self.client is not None:
            await self.client.aclose()

    def on_resize(self) -> None:
        narrow = self.size.width < NARROW_WIDTH
        self.set_class(narrow, "-narrow")
        self.set_class(self.size.height < SHORT_HEIGHT, "-short")
        self.query_one(Footer).compact = narrow
        self.query_one(PromptPane).border_title = "Prompt · below: m Server metrics, h GPU / host" if narrow else "Prompt"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "start_server_again" and self.simulator is None and self.served is None:
            return False  # hidden: phasetop runs no server
        return None if self.why_disabled(action) else True

    def why_disabled(self, action: str) -> str | None:
        """Why a key cannot act now (its binding is shown disabled, and pressing it says this), or None."""
        serves = self.served is not None
        return restart_key_disabled(action, self.simulator_state, serves) or self.lab.why_disabled(action)

    # ---- actions -------------------------------------------------------------------------------

    def action_show_pane(self, pane_id: str) -> None:
        """Scroll the pane into view (stacked panes, a narrow terminal) and mark it a moment, so the key shows
        where the pane is even where every pane was already in view."""
        pane = self.query_one(f"#{pane_id}")
        pane.focus()
        pane.scroll_visible()
        pane.add_class("-brought")
        self.set_timer(BROUGHT_S, partial(pane.remove_class, "-brought"))

    def action_send(self) -> None:
        self.query_one(PromptPane).request_typed()

    def action_preset(self, key: str) -> None:
        self.query_one(PromptPane).request_preset(next(p for p in PRESETS if p.key == key))

    def action_timeline_view(self) -> None:
        self.query_one(TimelinePane).toggle_view()

    def action_select_lane(self, step: int) -> None:
        if not self.timings:
            self.notify("no lane to select: the timeline is empty (1–5 send a prompt)", title="timeline")
            return
        self.state.select(step)
        self.selected_back = self.state.selected_back
        self.diagnosis = self.state.diagnosis()

    def action_clear(self) -> None:
        self.state.clear()
        self._publish()

    def action_help(self) -> None:
        keys = [(b.binding.key_display or b.binding.key, b.binding.description + ("" if b.enabled else " (not now)"))
                for b in self.active_bindings.values() if b.binding.description]
        self.app.push_screen(HelpScreen(keys))

    def action_start_server_again(self) -> None:
        self.simulator_state = "starting"
        start = (partial(start_served_again, self.served) if self.served is not None
                 else partial(restart_simulator, self.simulator))
        self.run_worker(partial(start, self.post_message), group="served", exclusive=True, thread=True,
                        exit_on_error=False)

    def action_edit_flags(self) -> None:
        self._open_flag_editor()

    def _open_flag_editor(self, refusal: Refusal | None = None, rerun: str | None = None) -> None:
        """The flag editor on the command running now, or again on a refused one (`refusal`: its error beside it)."""
        served = self.served
        self.app.push_screen(FlagEditorScreen(served.command, served.first, self.loop.reruns(), refusal, rerun),
                             self._edited)

    def _edited(self, restart: RestartRequest | None) -> None:
        self._run(self.loop.edited(restart, self._served_now()))

    def action_server_log(self) -> None:
        served = self.served
        self.app.push_screen(ServerLogScreen(served.log_tail, f"Server log · {one_line(str(served.command), 160)}"))

    def action_roofline(self) -> None:
        self.roofline = RooflineScreen(self.roofline_view(), self.action_preset)
        self.app.push_screen(self.roofline, lambda _: setattr(self, "roofline", None))

    def roofline_view(self) -> LiveRoofline:
        """Where the timeline's requests and the server's window sit under the device's roofs."""
        state = self.state
        target = live_target(state.simulator_flags, state.served.model if state.served else None, state.devices,
                             local_port(self.server_url) is not None)
        session = self.lab.sessions.current
        return live_roofline(target, self.kept_timings, self.metrics, state.devices, session.sweeps if session else None)

    def _show_roofline(self) -> None:
        if self.roofline is not None:
            self.roofline.view = self.roofline_view()

    def action_runs(self) -> None:
        self.app.push_screen(RunsScreen(runs_dir(self.settings)))

    def action_traffic(self) -> None:
        receiving = endpoint_of(self.traces) if self.traces is not None else None
        save = (lambda run: self._run([SaveRun(run, "traffic window")])) if self.save_runs else None
        self.app.push_screen(TrafficScreen(self.traffic, receiving, lambda: self.kept_timings,
                                           lambda: self.metrics.histograms if self.metrics else {}, save,
                                           lambda: self.settings.poll.metrics_window_s))

    def action_toggle_load(self) -> None:
        self._run(self.lab.toggle_load())

    def action_turn_rate(self, factor: float) -> None:
        self._run(self.lab.turn_rate(factor))

    def action_turn_concurrency(self, factor: float) -> None:
        self._run(self.lab.turn_concurrency(factor))

    def action_compare_before(self) -> None:
        self._run(self.lab.compare_before(datetime.now().astimezone()))

    def action_sweep(self, vary: str) -> None:
        self._run(self.lab.sweep(vary))

    # ---- intents from panes --------------------------------------------------------------------

    @on(PromptPane.SendRequested)
    def _send(self, event: PromptPane.SendRequested) -> None:
        preset = event.preset
        first_id = self.state.send(preset.concurrency if preset else 1)
        self.send_requests(preset.send(first_id) if preset else Send(first_id, "typed", event.text, None, 1, TYPED_MAX_TOKENS))

    def send_requests(self, send: Send) -> Worker | None:
        """Start `send` through the meters (see `tui.app.feeds.requests`); its answer shows in the prompt pane.
        None: the server is not known yet."""
        served = self.state.served
        if served is None or served.model is None:
            self.notify(NOT_KNOWN_YET, severity="warning")
            return None
        self.query_one(PromptPane).start_answer(f"── {send.label} ──")
        now_unix = time()  # one stamp for both: a rerun's compare counts from the loop's, the session's sends by it
        self.loop.sent(send, monotonic(), now_unix)
        self.lab.sent(send, now_unix)
        sender = RequestSender(self.settings, self.server_url, self.meters.meter_for, self.post_message)
        return self.run_worker(sender.send(send, served.api, served.model, bool(self.state.server_fresh)),
                               group="requests", exit_on_error=False)

    # ---- facts from workers --------------------------------------------------------------------

    @on(RequestStarted)
    def _started(self, event: RequestStarted) -> None:
        self.state.started(event.request_id, event.label, event.t_sent_unix, event.prompt_tokens, follow=not event.load)
        self._publish_soon()

    @on(TokenBatch)
    def _token_batch(self, event: TokenBatch) -> None:
        self.state.tokens(event.lanes)
        self._publish_soon()

    @on(RequestCompleted)
    def _completed(self, event: RequestCompleted) -> None:
        self.state.completed(event.request_id, event.timing)
        if event.load:  # the load is saved as its own run; the dial counts its failures
            self._publish_soon()
            return
        self._run(self.lab.request_completed(event.timing))
        self._requests_ended(range(event.request_id, event.request_id + 1))
        if not event.timing.ok:
            self.notify(event.timing.error or "request failed", title="request failed", severity="error", markup=False)
        self._publish_soon()

    @on(NotSent)
    def _not_sent(self, event: NotSent) -> None:
        self.notify(event.reason, title="not sent", severity="error", markup=False)
        self._requests_ended(event.request_ids)

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

    @on(ServerCameUp)
    def _up(self, event: ServerCameUp) -> None:
        self.state.server_up(Served(event.kind, event.model, event.model_bytes), event.fresh, event.max_model_len)
        self._show_server()
        self._set_down(False)
        self._run(self.lab.server_up(datetime.now().astimezone()))
        self._show_ceiling()
        if self.live:  # the first send then finds its meter ready
            self.meters.start()

    @on(ServerWentDown)
    def _down(self, event: ServerWentDown) -> None:
        self.state.server_down(event.since, event.reason)
        self._show_server()
        self._set_down(True)
        served = self.served
        if self.simulator is None and served is not None and not served.running and self.simulator_state == "running":
            self._server_exited(f"the server phasetop runs exited ({one_line(served.exit_line(), 300)})")

    @on(MetricsScraped)
    def _scraped(self, event: MetricsScraped) -> None:
        if self.scraper is not None and event.generation != self.scraper.generation:
            return  # read before phasetop restarted the server, handled after: its restart is the one already counted
        self._run(self.lab.scraped(event.snapshot, datetime.now().astimezone()))
        back = self.state.scraped(event.snapshot)
        self.metrics = event.snapshot
        if self.state.decode_ceiling_tok_s != self.decode_ceiling_tok_s:  # a speculating server's tokens a step moved it
            self._show_ceiling()
            self._publish_soon()  # a lane flagged only for beating the old ceiling may be lifted (`LiveSession.scraped`)
        else:
            self._show_server()
        if back:
            self._set_down(False)
        if event.snapshot.restart and self.live:  # also when it fell between two scrapes and never looked down
            self.run_worker(find_server(self.client, self.settings, self.server_url, self.post_message), group="server",
                            exclusive=True, exit_on_error=False)
        self.diagnosis = self.state.diagnosis()
        self._show_roofline()

    @on(MetricsUnavailable)
    def _no_metrics(self, event: MetricsUnavailable) -> None:
        self.query_one(MetricsPane).reason = event.reason

    @on(GpuSampled)
    def _gpu(self, event: GpuSampled) -> None:
        self.lab.gpu_sampled(event.sample)
        self.state.gpu_sampled(event.sample.devices)
        self.gpu = event.sample
        self._show_ceiling()

    @on(HostSampled)
    def _host(self, event: HostSampled) -> None:
        self.host = event.sample

    @on(ClientSampled)
    def _client(self, event: ClientSampled) -> None:
        busy = event.cpu_pct is not None and event.cpu_pct >= CLIENT_BUSY_PCT
        self.client_busy = busy_line(event.cpu_pct) if busy else ""

    @on(SessionIdentified)
    def _identified(self, event: SessionIdentified) -> None:
        if self.lab.identified(event.number, event.identity, event.info, event.info.max_model_len):
            self.state.identified(event.identity.get("simulator_flags"))
        self._show_ceiling()
        if self.served is not None:  # (no served command, no tuning loop)
            self._run(self.loop.session_identified(self._served_now()))

    @on(RunSaved)
    def _run_saved(self, event: RunSaved) -> None:
        self._run(self.lab.run_saved(event.what, event.run_id, event.error))

    @on(LoadProgressed)
    def _load_progressed(self, event: LoadProgressed) -> None:
        self.lab.load_progressed(event.progress, event.ttft_p50_s, event.itl_p50_s, event.bursts)
        self._show_lab()

    @on(LoadStopped)
    def _load_stopped(self, event: LoadStopped) -> None:
        self._run(self.lab.load_stopped(event.figures, event.error))

    @on(SimulatorExited)
    def _simulator_exited(self, event: SimulatorExited) -> None:
        self._server_exited(f"the simulator exited ({one_line(event.reason, 300)})")

    def _server_exited(self, what: str) -> None:
        """The server phasetop runs exited without being asked: said on the GPU/host pane and in a toast, R starts it."""
        self.simulator_state = "exited"
        self.query_one(GpuPane).server_exit = what
        self.notify(f"{what}. Press R to start it again.", title="server exited", severity="error", timeout=30,
                    markup=False)

    @on(SimulatorRestarted)
    def _simulator_restarted(self, event: SimulatorRestarted) -> None:
        if event.error:
            self.simulator_state = "exited"
            self.notify(f"{one_line(event.error, 300)}. R tries again.", title="server not started", severity="error",
                        markup=False)
            return
        self.simulator_state = "running"
        self.query_one(GpuPane).server_exit = None
        self.notify("the server is running again", title="server started", markup=False)

    @on(ServedProgress)
    def _served_progress(self, event: ServedProgress) -> None:
        self.state.restart_progress(event.elapsed_s, event.line)
        self._show_server()

    @on(ServedRestarted)
    def _served_restarted(self, event: ServedRestarted) -> None:
        self.simulator_state = "running" if self.served.running else "exited"
        if self.served.running:
            self.query_one(GpuPane).server_exit = None
        else:
            self.query_one(GpuPane).server_exit = "no server runs: the restart and the last good flags both failed"
        self.state.restart_ended()
        self._show_server()
        self._run(self.loop.restarted(event.refusal, self._served_now()))

    # ---- the core's effects ----------------------------------------------------------------------

    def _requests_ended(self, request_ids: range) -> None:
        """Requests that finished, or could not begin, end their part of the workload the tuning loop plays."""
        if self.served is not None:
            self._run(self.loop.ended(request_ids, self._served_now()))

    def _served_now(self) -> Server:
        current = self.lab.sessions.current
        return Server(self.served.command, self.served.running, current.number if current else 0)

    def _experiment_ran(self, run: dict) -> None:
        self.lab.experiment_ran(run)
        self._show_roofline()
        self._run(self.loop.experiment_ran(run))

    def _save_due(self) -> None:
        self._save_timer = None
        self._run(self.lab.save_due(datetime.now().astimezone()))

    def _resend(self, send: Send) -> None:
        again = replace(send, first_id=self.state.send(send.concurrency))
        sent = self.send_requests(again) is not None  # not when the server is not known (it says so)
        self.loop.resent(range(again.first_id, again.first_id + again.concurrency) if sent else None)

    def _run(self, effects: list[LabEffect | Effect]) -> None:
        """Run what the lab and the tuning loop asked for, then show the lab's state."""
        for effect in effects:
            match effect:
                case Notify(message, title, severity, timeout):
                    self.notify(message, title=title, severity=severity, timeout=timeout, markup=False)
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
                    self._load_stop.set()
                case TurnLoad(rate, concurrency):
                    self._load_dial.rate, self._load_dial.concurrency = rate, concurrency
                case OpenComparison(comparison, title):
                    self.app.push_screen(CompareScreen(comparison, title))
                case OpenExperiment(plan):
                    self.app.push_screen(ExperimentScreen(plan, self.settings, self.server_url, self.lab.server_info,
                                                          self.lab.saving, self.meters.meter_for,
                                                          self.state.guard, self._experiment_ran))
                case StartRestart(command, changes):
                    self.simulator_state = "starting"
                    self.state.restarting(changes)
                    self._show_server()
                    self.run_worker(partial(restart_served, self.served, command, self.post_message),
                                    group="served", exclusive=True, thread=True, exit_on_error=False)
                case NewSession(reason):
                    if self.scraper is not None:
                        self.scraper.forget()
                    self._run(self.lab.restarted((reason,), datetime.now().astimezone()))
                case Play(workload):
                    for after_s, send in workload:
                        self.set_timer(max(after_s, 0.001), partial(self._resend, send))
                case CompareBefore(since_unix):
                    self._run(self.lab.compare_before(datetime.now().astimezone(), since_unix))
                case RunExperiment(vary):
                    self._run(self.lab.sweep(vary))
                case CompareRuns(before, after, title):
                    self.app.push_screen(CompareScreen(compare_runs(before, after), title))
                case ReopenEditor(refusal, rerun):
                    self._open_flag_editor(refusal, rerun)
        self._show_lab()

    def watch_dial(self, dial: DialState | None) -> None:
        self.set_class(dial is not None, "-load-dial")  # toasts rise above the dial's lines (phasetop.tcss)

    def _show_lab(self) -> None:
        """The lab's state into the reactives the dial and the keys are bound to."""
        if self.dial is not self.lab.dial:
            self.dial = self.lab.dial
        self.load_running = self.lab.load_running
        self.has_before = self.lab.has_before

    def _save_run(self, run: dict, what: str) -> None:
        """In a thread worker: write `run`; the outcome comes back as a message."""
        self.post_message(save_quietly(run, self.settings, what))

    def _start_load(self, rate: float, concurrency: int) -> None:
        self._load_dial = LoadDial(rate, concurrency)
        self._load_stop = threading.Event()
        workload = Workload(LOAD_PROMPT_TOKENS, LOAD_MAX_TOKENS, backlog=LOAD_BACKLOG, exact_length=self.settings.exact_length)
        driver = LoadDriver(self.settings, self.server_url, self.meters.meter_for, self.post_message, self.save_runs,
                            self.state.take_ids, self.state.guard)
        self.run_worker(partial(driver.run, self.lab.server_info, self._load_dial, workload, self._load_stop),
                        group="load", exclusive=True, thread=True, exit_on_error=False)

    # ---- state to panes ------------------------------------------------------------------------

    def _publish_soon(self) -> None:
        """Publish once after the messages already queued (a burst, every stream's batch, replots once), and
        no sooner than the frame budget allows after the last publish."""
        if self._publish_pending:
            return
        self._publish_pending = True
        wait_s = self._published_at + self._publish_interval_s - monotonic()
        if wait_s > 0:
            self.set_timer(wait_s, self._publish)
        else:
            self.call_later(self._publish)

    def _publish(self) -> None:
        self._publish_pending = False
        self._published_at = monotonic()
        published = self.state.publish()
        if published.answer is not None:
            self.query_one(PromptPane).append_answer(published.answer, final=published.answer_final)
        self.lanes = published.lanes
        self.batch_of = published.batch_of
        self.selected_back = published.selected_back  # before the timings: the pane draws them all once, when the timings come
        self.timings = published.timings
        self.kept_timings = published.kept
        self.diagnosis = self.state.diagnosis()
        self._show_roofline()

    def _show_ceiling(self) -> None:
        """The ceiling the live session has (given, or derived once the server and devices are known)."""
        self.ceiling_factor = self.state.speculation_factor
        self.decode_ceiling_tok_s = self.state.decode_ceiling_tok_s
        self.lab.ceiling_known(self.state.decode_ceiling_tok_s)
        if self.state.derived is not None:
            self.cpu_ceiling = self.state.derived.line
        self._show_server()
        self._show_roofline()

    def _show_server(self) -> None:
        """The header's server as the live session has it, redrawn only when it changed (a scrape mostly changes nothing)."""
        server = self.state.server
        if server != self.server:
            self.server = server

    def _set_down(self, down: bool) -> None:
        for pane in self.query(".pane"):
            pane.set_class(down, "-down")
