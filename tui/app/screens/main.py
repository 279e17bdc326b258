"""The one screen: token timeline, prompt, server metrics, GPU/host, and the status line.

A composer and router: the workers (`tui.app.feeds`) post facts, each handler gives its fact to the screen's state
(`tui.core.state.main_state`: the live session, the lab and the tuning loop behind one face) and runs what it
answers with (`MainScreenIO.run_effects`, the one place effects run), which ends by copying the state into the
reactives the panes are bound to."""

from __future__ import annotations

from functools import partial
from time import monotonic

from textual import events, on
from textual.app import ComposeResult
from textual.containers import Container, Vertical
from textual.reactive import reactive
from textual.widgets import Footer

from tui.app.lab_messages import LoadProgressed, LoadStopped, RunSaved, SessionIdentified
from tui.app.layout import NARROW_WIDTH, SHORT_HEIGHT
from tui.app.messages import (
    ClientSampled,
    GpuSampled,
    HostSampled,
    MeterDied,
    MetricsScraped,
    MetricsUnavailable,
    NotSent,
    RequestCompleted,
    RequestOnWire,
    RequestStarted,
    ServedProgress,
    ServedRestarted,
    ServerCameUp,
    ServerWentDown,
    SimulatorExited,
    SimulatorRestarted,
    TokenBatch,
)
from tui.app.screens.main_io import MainScreenIO
from tui.app.screens.main_keys import MAIN_BINDINGS
from tui.app.screens.roofline import RooflineScreen
from tui.app.widgets.gpu_pane import GpuPane
from tui.app.widgets.load_dial import LoadDialPane
from tui.app.widgets.metrics_pane import MetricsPane
from tui.app.widgets.prompt_pane import PRESETS, TYPED_MAX_TOKENS, PromptPane, probe_sends
from tui.app.widgets.status_line import StatusLine
from tui.app.widgets.timeline_pane import TimelinePane
from tui.config import Settings
from tui.core.hardware.roofline_live import LiveRoofline
from tui.core.measure.client_load import CLIENT_BUSY_PCT, busy_line
from tui.core.measure.records import RequestTiming
from tui.core.measure.sends import Send
from tui.core.state.lab import DialState, Lab
from tui.core.state.live import LiveSession
from tui.core.state.main_state import MainState
from tui.core.state.server_state import ServerState
from tui.core.state.server_watch import Served, ServerWatch
from tui.core.state.tuning_loop import TuningLoop
from tui.core.telemetry.readings import GpuSample, HostSample, MetricsSnapshot
from tui.core.telemetry.served import TraceWindow
from tui.core.view.lane_figures import NEWEST
from tui.core.view.timeline import ALIGNED, KEEP_LANES, Lane
from tui.meter.pool import MeterPool, default_meters
from tui.sources.host import local_port

PUBLISH_INTERVAL_S = 1 / 8
"""State reaches the panes at most this often (the frame budget): at 32 streams a batch lands every 50 ms,
and painting each one cost the main thread more than reading the streams did."""
BROUGHT_S = 1.5
"""How long a pane a key brought into view keeps its marked border."""


class MainScreen(MainScreenIO):
    """Routes facts to the screen's state; panes receive the state through data_bind and render it."""

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
    view: reactive[str] = reactive(ALIGNED, repaint=False)
    """The timeline's view (the live session's)."""
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

    def __init__(self, settings: Settings, server_url: str, simulated: str | None = None,
                 ceiling: tuple[float, float, float] | None = None, live: bool = True) -> None:
        super().__init__()
        self.settings = settings
        """Everything configured; the API key stays inside the HTTP client."""
        self.server_url = server_url
        self.live = live
        self.state = MainState(LiveSession(ServerWatch(ceiling, local_port(server_url) is not None, settings.bandwidth_gbs,
                                                       ServerState(url=server_url, simulated=simulated))),
                               Lab(server_url, saving=live), TuningLoop(probe_sends()))
        """The requests and the server (`live`), sessions, runs, the load dial and the experiments' keys (`lab`),
        restarts with new flags and what runs again after them (`loop`)."""
        self.meters = MeterPool(settings.meters or default_meters(KEEP_LANES, renders=True),
                                on_ended=lambda reason: self.post_message(MeterDied(reason)))
        self._publish_pending = False
        self._published_at = 0.0
        self._publish_interval_s = PUBLISH_INTERVAL_S if live else 0.0
        """A recorded feed (tests, snapshots) publishes after each message: no timer is live at a snapshot."""
        self.traffic = TraceWindow()
        self.roofline: RooflineScreen | None = None
        """The roofline screen while it is open: it is handed each new state."""
        self.show_state()

    def compose(self) -> ComposeResult:
        yield StatusLine(id="status").data_bind(state=MainScreen.server)
        # Only the panes scroll (stacked on a narrow terminal): the status line above and the footer stay.
        with Container(id="panes"):
            # The timeline first: the whole top row (stacked: the top pane), the split is what this screen shows.
            yield TimelinePane(id="timeline-pane", classes="pane").data_bind(
                timings=MainScreen.timings, lanes=MainScreen.lanes, batch_of=MainScreen.batch_of,
                decode_ceiling_tok_s=MainScreen.decode_ceiling_tok_s, ceiling_factor=MainScreen.ceiling_factor,
                diagnosis=MainScreen.diagnosis, client_busy=MainScreen.client_busy, selected_back=MainScreen.selected_back,
                view=MainScreen.view)
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
        return self.state.why_disabled(action, serves=self.served is not None)

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
        self.state.live.toggle_view()
        self.show_state()

    def action_select_lane(self, step: int) -> None:
        if not self.timings:
            self.notify("no lane to select: the timeline is empty (1–5 send a prompt)", title="timeline")
            return
        self.state.live.select(step)
        self.show_state()
        self.query_one(TimelinePane).draw_now()  # a key's answer is drawn at once, not at the next frame budget

    def action_clear(self) -> None:
        self.state.live.clear()
        self._publish()

    def action_roofline(self) -> None:
        self.roofline = RooflineScreen(self.roofline_view(), self.action_preset)
        self.app.push_screen(self.roofline, lambda _: setattr(self, "roofline", None))

    def roofline_view(self) -> LiveRoofline:
        """Where the timeline's requests and the server's window sit under the device's roofs."""
        return self.state.roofline(local_port(self.server_url) is not None)

    def action_toggle_load(self) -> None:
        self.run_effects(self.state.lab.toggle_load())

    def action_turn_rate(self, factor: float) -> None:
        self.run_effects(self.state.lab.turn_rate(factor))

    def action_turn_concurrency(self, factor: float) -> None:
        self.run_effects(self.state.lab.turn_concurrency(factor))

    def action_compare_before(self) -> None:
        self.run_effects(self.state.lab.compare_before(self.state.clock()))

    def action_sweep(self, vary: str) -> None:
        self.run_effects(self.state.lab.sweep(vary))

    # ---- intents from panes --------------------------------------------------------------------

    @on(PromptPane.SendRequested)
    def _send(self, event: PromptPane.SendRequested) -> None:
        preset = event.preset
        first_id = self.state.live.send(preset.concurrency if preset else 1)
        self.send_requests(preset.send(first_id) if preset else Send(first_id, "typed", event.text, None, 1, TYPED_MAX_TOKENS))

    # ---- facts from workers --------------------------------------------------------------------

    @on(RequestStarted)
    def _started(self, event: RequestStarted) -> None:
        self.state.live.started(event.request_id, event.label, event.t_sent_unix, event.prompt_tokens,
                                follow=not event.load)
        self.publish_soon()

    @on(RequestOnWire)
    def _on_wire(self, event: RequestOnWire) -> None:
        self.state.live.on_wire(event.request_id, event.t_sent_unix)

    @on(TokenBatch)
    def _token_batch(self, event: TokenBatch) -> None:
        self.state.live.tokens(event.lanes)
        self.publish_soon()

    @on(RequestCompleted)
    def _completed(self, event: RequestCompleted) -> None:
        self.run_effects(self.state.completed(event.request_id, event.timing, event.load, self.running))

    @on(NotSent)
    def _not_sent(self, event: NotSent) -> None:
        self.run_effects(self.state.not_sent(event.request_ids, event.reason, self.running))

    @on(ServerCameUp)
    def _up(self, event: ServerCameUp) -> None:
        self.run_effects(self.state.server_up(Served(event.kind, event.model, event.model_bytes), event.fresh,
                                              event.max_model_len))

    @on(ServerWentDown)
    def _down(self, event: ServerWentDown) -> None:
        served = self.served
        own = self.running if self.simulator is None else None  # phasetop's simulator says itself that it exited
        self.run_effects(self.state.server_down(event.since, event.reason, own,
                                                served.exit_line if served is not None else lambda: ""))

    @on(MetricsScraped)
    def _scraped(self, event: MetricsScraped) -> None:
        if self.scraper is not None and event.generation != self.scraper.generation:
            return  # read before phasetop restarted the server, handled after: its restart is the one already counted
        self.run_effects(self.state.scraped(event.snapshot))

    @on(MetricsUnavailable)
    def _no_metrics(self, event: MetricsUnavailable) -> None:
        self.query_one(MetricsPane).reason = event.reason

    @on(GpuSampled)
    def _gpu(self, event: GpuSampled) -> None:
        self.gpu = event.sample
        self.run_effects(self.state.gpu_sampled(event.sample))

    @on(HostSampled)
    def _host(self, event: HostSampled) -> None:
        self.host = event.sample

    @on(ClientSampled)
    def _client(self, event: ClientSampled) -> None:
        busy = event.cpu_pct is not None and event.cpu_pct >= CLIENT_BUSY_PCT
        self.client_busy = busy_line(event.cpu_pct) if busy else ""

    @on(SessionIdentified)
    def _identified(self, event: SessionIdentified) -> None:
        self.run_effects(self.state.identified(event.number, event.identity, event.info, event.info.max_model_len,
                                               self.running))

    @on(RunSaved)
    def _run_saved(self, event: RunSaved) -> None:
        self.run_effects(self.state.lab.run_saved(event.what, event.run_id, event.error))

    @on(LoadProgressed)
    def _load_progressed(self, event: LoadProgressed) -> None:
        self.state.lab.load_progressed(event.progress, event.ttft_p50_s, event.itl_p50_s, event.bursts)
        self.show_state()

    @on(LoadStopped)
    def _load_stopped(self, event: LoadStopped) -> None:
        self.run_effects(self.state.lab.load_stopped(event.figures, event.error))

    @on(SimulatorExited)
    def _simulator_exited(self, event: SimulatorExited) -> None:
        self.run_effects(self.state.simulator_exited(event.reason))

    @on(SimulatorRestarted)
    def _simulator_restarted(self, event: SimulatorRestarted) -> None:
        self.run_effects(self.state.started_again(event.error))

    @on(ServedProgress)
    def _served_progress(self, event: ServedProgress) -> None:
        self.state.restart_progress(event.elapsed_s, event.line)
        self.show_state()

    @on(ServedRestarted)
    def _served_restarted(self, event: ServedRestarted) -> None:
        self.run_effects(self.state.restarted(event.refusal, self.running))

    # ---- state to panes ------------------------------------------------------------------------

    def publish_soon(self) -> None:
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
        self.show_state()

    def show_state(self) -> None:
        """The state into the reactives, each set only where it changed (a scrape mostly changes nothing)."""
        live, server, lab = self.state.live, self.state.server, self.state.lab
        for name, value in (("server", server.header), ("decode_ceiling_tok_s", server.decode_ceiling_tok_s),
                            ("ceiling_factor", server.speculation_factor), ("selected_back", live.selected_back),
                            ("view", live.view), ("diagnosis", live.diagnosis()), ("load_running", lab.load_running),
                            ("has_before", lab.has_before), ("simulator_state", self.state.server_state)):
            if getattr(self, name) != value:
                setattr(self, name, value)
        if server.metrics is not self.metrics:
            self.metrics = server.metrics
        if server.derived is not None and server.derived.line != self.cpu_ceiling:
            self.cpu_ceiling = server.derived.line
        if self.dial is not lab.dial:
            self.dial = lab.dial
        if self.roofline is not None:
            self.roofline.view = self.roofline_view()

    def watch_dial(self, dial: DialState | None) -> None:
        self.set_class(dial is not None, "-load-dial")  # toasts rise above the dial's lines (phasetop.tcss)
