"""The one screen: prompt, token timeline, server metrics, GPU/host, and the status line."""

from __future__ import annotations

from dataclasses import replace
from time import monotonic

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical
from textual.reactive import reactive
from textual.widgets import Footer

from tui.app.feeds import SIMULATOR_BINDINGS, FeedsMixin
from tui.app.messages import (
    ClientSampled,
    GpuSampled,
    HostSampled,
    MetricsScraped,
    MetricsUnavailable,
    RequestCompleted,
    RequestStarted,
    ServerCameUp,
    ServerWentDown,
    TokenBatch,
)
from tui.app.lab import LAB_BINDINGS, LabMixin
from tui.app.screens.help import HelpScreen
from tui.app.widgets.gpu_pane import GpuPane
from tui.app.widgets.load_dial import LoadDialPane
from tui.app.widgets.metrics_pane import MetricsPane
from tui.app.widgets.prompt_pane import PRESETS, Preset, PromptPane
from tui.app.widgets.status_line import ServerState, StatusLine
from tui.app.widgets.timeline_pane import KEEP_LANES, TimelinePane
from tui.config import Settings
from tui.core.client_load import ClientLoad, busy_line
from tui.core.delivery import flag_bursts
from tui.core.diagnosis import LiveFigures, diagnose
from tui.core.lane_figures import NEWEST, after_send, diagnosis_text, moved, selected_index
from tui.core.records import RequestTiming
from tui.core.server_ceiling import ServerCeiling, ceiling_for
from tui.core.telemetry import GpuSample, HostSample, MetricsSnapshot
from tui.core.timeline import batches, keep_count
from tui.sources.host import local_port
from tui.sources.http import client_for
from tui.sources.prompts import filler_text

KEEP_REQUESTS = 40
"""Requests kept in state; the timeline keeps the last 32 (32 streams, one batch, stay whole)."""
PUBLISH_INTERVAL_S = 1 / 8
"""State reaches the panes at most this often (the frame budget): at 32 streams a batch lands every 50 ms,
and painting each one cost the main thread more than reading the streams did."""
MAX_TOKENS = 128
NARROW_WIDTH = 100
SHARED_PREFIX = filler_text("[shared system prompt]", 1800)
"""The shared-system-prompt preset sends this same prefix every time, so prefix caching can hit."""
PRESET_KEYS = Binding.Group("Presets")
"""1–4 take one footer entry ("1 2 3 4 Presets"); the help screen and palette still list each."""


class MainScreen(FeedsMixin, LabMixin):
    """Owns the state; panes receive it through data_bind and render it."""

    # The footer shows these in this order and cuts off what does not fit: the fixed keys (s, ?, and the
    # app's q after the lab's two) fit an 80-column terminal because the presets share one footer entry.
    BINDINGS = [
        Binding("s", "send", "Send", tooltip="Send the typed prompt (or the short preset)", id="send"),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="Every key, with what it does", id="help"),
        Binding("1", "preset('short')", "Short 200", tooltip="Send a 200-token prompt", id="preset.short", group=PRESET_KEYS),
        Binding("2", "preset('long')", "Long 2000", tooltip="Send a 2,000-token prompt", id="preset.long", group=PRESET_KEYS),
        Binding("3", "preset('system')", "Shared prefix", tooltip="Send a prompt behind the same long system prompt",
                id="preset.system", group=PRESET_KEYS),
        Binding("4", "preset('concurrent')", "8 at once", tooltip="Send 8 short prompts at once", id="preset.concurrent",
                group=PRESET_KEYS),
        Binding("c", "clear", "Clear", tooltip="Clear the timeline", id="clear"),
        Binding("v", "timeline_view", "View", tooltip="Timeline: each lane from its own send (aligned), or one wall clock",
                id="timeline.view"),
        # Not priority bindings: a focused prompt box (or the answer) keeps its own arrows.
        Binding("up", "select_lane(1)", "Older lane", key_display="↑", show=False, id="timeline.older",
                tooltip="The figures and diagnosis under the timeline: the lane above (an older request)"),
        Binding("down", "select_lane(-1)", "Newer lane", key_display="↓", show=False, id="timeline.newer",
                tooltip="The figures and diagnosis under the timeline: the lane below (a newer request)"),
        *LAB_BINDINGS,
        *SIMULATOR_BINDINGS,
    ]

    # The screen draws nothing itself (panes get these through data_bind): repaint=True would redraw
    # the whole screen on every sample and every token batch.
    timings: reactive[list[RequestTiming]] = reactive(list, always_update=True, repaint=False)
    """Requests finished and in flight, oldest first."""
    labels: reactive[list[str]] = reactive(list, always_update=True, repaint=False)
    """One timeline label per request in `timings`."""
    metrics: reactive[MetricsSnapshot | None] = reactive(None, always_update=True, repaint=False)
    """The latest /metrics snapshot."""
    gpu: reactive[GpuSample | None] = reactive(None, always_update=True, repaint=False)
    host: reactive[HostSample | None] = reactive(None, always_update=True, repaint=False)
    server: reactive[ServerState | None] = reactive(None, always_update=True, repaint=False)
    """The server as last seen: up, or down since when."""
    decode_ceiling_tok_s: reactive[float | None] = reactive(None, repaint=False)
    """The single-stream ceiling for the server's model and device, when both are known."""
    diagnosis: reactive[str] = reactive("", repaint=False)
    """The "what to change" findings of the selected request, one per line ("in flight" until it ends)."""
    selected_back: reactive[int] = reactive(NEWEST, repaint=False)
    """The lane the figures under the timeline speak of, counted back from the newest (0); a send resets it."""
    client_busy: reactive[str] = reactive("", repaint=False)
    """"client busy: N % CPU, figures marked" while phasetop's own process is near a core; "" otherwise."""
    cpu_ceiling: reactive[str | None] = reactive(None, repaint=False)
    """How the ceiling of a server phasetop did not start was derived (its GPU, or the CPU row), or why
    there is none ("ceiling: unknown model …"); shown in the GPU/host pane."""

    def __init__(self, settings: Settings, server_url: str, simulated: str | None = None,
                 ceiling: tuple[float, float, float] | None = None, live: bool = True) -> None:
        super().__init__()
        self.settings = settings
        """Everything configured; the API key stays inside the HTTP client."""
        self.server_url = server_url
        self._ceiling = ceiling
        """(decode ceiling tok/s, KV bytes per token, weight bytes) for a known model and device."""
        self._live = live
        """False: no workers start; tests and snapshots post the messages themselves."""
        self.api: str | None = None
        self.model: str | None = None
        self._model_bytes: int | None = None
        self.server_fresh: bool | None = None
        """True while the server has served nothing since it came up (its /metrics said so then): the next
        request sent pays its cold start and is marked cold."""
        self.simulator_flags: dict[str, str] | None = None
        """A phasetop simulator's flags, when the server turns out to be one (its identity says so)."""
        self._served: ServerCeiling | None = None
        """The ceiling derived for a server phasetop did not start (`_ceiling` is None)."""
        self._records: dict[int, RequestTiming] = {}
        self._labels: dict[int, str] = {}
        self._arrived: dict[int, list[float]] = {}
        self._done: set[int] = set()
        """Requests that ended (completed or failed): the others are in flight."""
        self._shown_ids: list[int] = []
        """The request id of each entry of `timings`, as last published."""
        self._new_send = False
        """A request started since the last publish: the selection goes back to the newest."""
        """Offsets of requests still streaming, as batches bring them (a list each: a tuple grown per batch
        would copy every offset again each time); folded into `_records` when published."""
        self.client_load = ClientLoad()
        """phasetop's own CPU, sampled by the GPU/host poll; the request threads read it to mark their timings."""
        self._next_id = 1
        self._publish_pending = False
        self._published_at = 0.0
        self._answer: list[str] = []
        """Answer text that arrived since the last publish (the prompt pane's, painted with the rest)."""
        self._answer_id: int | None = None
        """The request whose answer the prompt pane shows: the newest of the latest send."""
        self._answer_ended = False
        """That request has ended: the next publish writes all its text."""
        self._publish_interval_s = PUBLISH_INTERVAL_S if live else 0.0
        """A recorded feed (tests, snapshots) publishes after each message: no timer is live at a snapshot."""
        self.server = ServerState(url=server_url, simulated=simulated)

    def compose(self) -> ComposeResult:
        yield StatusLine(id="status").data_bind(state=MainScreen.server)
        # Only the panes scroll (stacked on a narrow terminal): the status line above and the footer stay.
        with Container(id="panes"):
            # The timeline first: the whole top row (stacked: the top pane), the split is what this screen shows.
            timeline = TimelinePane(id="timeline-pane", classes="pane").data_bind(
                timings=MainScreen.timings, labels=MainScreen.labels,
                decode_ceiling_tok_s=MainScreen.decode_ceiling_tok_s, diagnosis=MainScreen.diagnosis,
                client_busy=MainScreen.client_busy, selected_back=MainScreen.selected_back,
            )
            yield timeline
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
        yield LoadDialPane(id="load-dial").data_bind(state=LabMixin.dial)
        yield Footer()

    def on_mount(self) -> None:
        self.client = client_for(self.settings, self.server_url)
        if self._ceiling:
            self.decode_ceiling_tok_s = self._ceiling[0]
        if not self._live:  # a recorded feed: every replot at once, so no timer is live at a snapshot
            self.query_one(TimelinePane).replot_interval_s = 0.0
        if self._live:
            self.find_server()
            self.poll_metrics()
            self.poll_gpu()
            self.follow_simulator()

    async def on_unmount(self) -> None:
        self.workers.cancel_all()
        await self.client.aclose()

    def on_resize(self) -> None:
        narrow = self.size.width < NARROW_WIDTH
        self.set_class(narrow, "-narrow")
        self.query_one(Footer).compact = narrow

    # ---- actions -------------------------------------------------------------------------------

    def action_send(self) -> None:
        self.query_one(PromptPane).request_typed()

    def action_preset(self, key: str) -> None:
        self.query_one(PromptPane).request_preset(next(p for p in PRESETS if p.key == key))

    def action_timeline_view(self) -> None:
        self.query_one(TimelinePane).toggle_view()

    def action_select_lane(self, step: int) -> None:
        kept = keep_count(batches(self.timings), KEEP_LANES)
        self.selected_back = moved(self.selected_back, step, kept)
        self._diagnose()

    def action_clear(self) -> None:
        self._records.clear()
        self._labels.clear()
        self._arrived.clear()
        self._done.clear()
        self._new_send = True
        self._publish()

    def action_help(self) -> None:
        keys = [(b.binding.key_display or b.binding.key, b.binding.description + ("" if b.enabled else " (not now)"))
                for b in self.active_bindings.values() if b.binding.description]
        self.app.push_screen(HelpScreen(keys))

    # ---- intents from panes --------------------------------------------------------------------

    @on(PromptPane.SendRequested)
    def _send(self, event: PromptPane.SendRequested) -> None:
        preset: Preset | None = event.preset
        first_id = self._next_id
        count = preset.concurrency if preset else 1
        self._next_id += count
        label = preset.label if preset else "typed"
        # The pane shows this send's answer from here on: text of an earlier request still arriving is not it.
        self._answer_id, self._answer_ended = first_id + count - 1, False
        self._answer.clear()
        self.query_one(PromptPane).start_answer(f"── {label} ──")
        self.send_requests(first_id, label, event.text, preset.prompt_tokens if preset else None, count,
                           MAX_TOKENS, SHARED_PREFIX if preset and preset.shared_prefix else None)

    # ---- facts from workers --------------------------------------------------------------------

    @on(RequestStarted)
    def _started(self, event: RequestStarted) -> None:
        self.server_fresh = False  # whichever request this is, the server has now been sent one
        self._records[event.request_id] = RequestTiming(ok=True, t_sent_unix=event.t_sent_unix, prompt_tokens=event.prompt_tokens)
        self._labels[event.request_id] = event.label
        self._answer_id = max(self._answer_id or 0, event.request_id)  # a send's own id is set ahead, in _send
        self._new_send = True
        self._publish_soon()

    @on(TokenBatch)
    def _token_batch(self, event: TokenBatch) -> None:
        for lane in event.lanes:
            if lane.offsets_s is not None:
                self._arrive(lane.request_id, lane.offsets_s, lane.text)
            elif lane.request_id in self._records and lane.request_id not in self._arrived:
                # A lane the timeline cannot show keeps its first offset only (its TTFT) until its exact record comes.
                self._arrived[lane.request_id] = [lane.first_offset_s]
        self._publish_soon()

    def _arrive(self, request_id: int, offsets_s: tuple[float, ...], text: str) -> None:
        if request_id not in self._records:
            return
        self._arrived.setdefault(request_id, []).extend(offsets_s)
        if text and request_id == self._answer_id:
            self._answer.append(text)

    @on(RequestCompleted)
    def _completed(self, event: RequestCompleted) -> None:
        self._arrived.pop(event.request_id, None)
        self._done.add(event.request_id)
        if event.request_id == self._answer_id:
            self._answer_ended = True
        if event.request_id in self._records:  # not when it was dropped as one too many to keep
            # Clumped arrivals time the delivery, not the generation: flagged, shown as such, kept out of the diagnosis.
            [self._records[event.request_id]] = flag_bursts([event.timing], self.decode_ceiling_tok_s)
        if not event.timing.ok:
            self.notify(event.timing.error or "request failed", title="request failed", severity="error", markup=False)
        self._publish_soon()

    @on(ServerCameUp)
    def _up(self, event: ServerCameUp) -> None:
        self.api, self.model, self._model_bytes, self.server_fresh = event.kind, event.model, event.model_bytes, event.fresh
        self.server = replace(self.server, kind=event.kind, model=event.model, max_model_len=event.max_model_len,
                              down_since=None, down_reason=None)
        self._set_down(False)
        self._set_ceiling()

    @on(ServerWentDown)
    def _down(self, event: ServerWentDown) -> None:
        since = self.server.down_since or event.since
        self.server = replace(self.server, down_since=since, down_reason=event.reason)
        self._set_down(True)

    @on(MetricsScraped)
    def _scraped(self, event: MetricsScraped) -> None:
        self.metrics = event.snapshot
        if self.server.down_since is not None:
            self.server = replace(self.server, down_since=None, down_reason=None)
            self._set_down(False)
        if event.snapshot.restart:  # also when it fell between two scrapes and never looked down
            self.find_server()
        config = ServerState.config_from(event.snapshot.engine_config, self.simulator_flags)
        if config != self.server.config:
            self.server = replace(self.server, config=config)
        self._diagnose()

    @on(MetricsUnavailable)
    def _no_metrics(self, event: MetricsUnavailable) -> None:
        self.query_one(MetricsPane).reason = event.reason

    @on(GpuSampled)
    def _gpu(self, event: GpuSampled) -> None:
        self.gpu = event.sample
        self._set_ceiling()

    @on(HostSampled)
    def _host(self, event: HostSampled) -> None:
        self.host = event.sample

    @on(ClientSampled)
    def _client(self, event: ClientSampled) -> None:
        self.client_busy = busy_line(event.cpu_pct) if self.client_load.busy else ""

    # ---- state ---------------------------------------------------------------------------------

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
        if self._answer or self._answer_ended:
            self.query_one(PromptPane).append_answer("".join(self._answer), final=self._answer_ended)
            self._answer.clear()
            self._answer_ended = False
        ids = sorted(self._records)[-KEEP_REQUESTS:]
        for stale in [i for i in self._records if i not in ids]:
            del self._records[stale], self._labels[stale]
            self._arrived.pop(stale, None)
            self._done.discard(stale)
        for i, offsets in self._arrived.items():
            if len(offsets) != len(self._records[i].token_offsets_s):
                self._records[i] = replace(self._records[i], token_offsets_s=tuple(offsets))
        timings = [self._records[i] for i in ids]
        back = after_send(self.selected_back, self._new_send, keep_count(batches(timings), KEEP_LANES))
        self._new_send = False
        self._shown_ids = ids
        self.labels = [self._labels[i] for i in ids]
        self.selected_back = back  # before the timings: the pane draws both once, when the timings come
        self.timings = timings
        self._diagnose()

    def _diagnose(self) -> None:
        """The findings of the selected request: "in flight" until it ends; none from a request timed in bursts
        (its figures time the delivery)."""
        index = selected_index(len(self.timings), self.selected_back)
        if index is None or len(self._shown_ids) != len(self.timings):
            self.diagnosis = ""
            return
        selected = self.timings[index]
        name = self.labels[index] if len(self.labels) == len(self.timings) else ""
        if self._shown_ids[index] not in self._done:
            self.diagnosis = diagnosis_text(name, [], in_flight=True)
            return
        latest = selected if selected.ok and not selected.burst else None
        snapshot = self.metrics
        kv_per_token = self._ceiling[1] if self._ceiling else self._served.kv_bytes_per_token if self._served else None
        figures = LiveFigures(
            ttft_s=latest.ttft_s if latest else None,
            prompt_tokens=latest.prompt_tokens if latest else None,
            context_tokens=(latest.prompt_tokens or 0) + (latest.output_tokens or 0) if latest else None,
            decode_tok_s=latest.decode_tok_s if latest else None,
            decode_ceiling_tok_s=self.decode_ceiling_tok_s,
            waiting=snapshot.waiting if snapshot else None,
            kv_cache_usage=snapshot.kv_cache_usage if snapshot else None,
            prefix_cache_hit_rate=snapshot.prefix_cache_hit_rate if snapshot else None,
            prefix_caching_on=_said_on(snapshot.engine_config.get("enable_prefix_caching")) if snapshot else None,
            kv_bytes_per_token=kv_per_token,
            engine=(snapshot.engine if snapshot else None) or self.api,
            on_cpu=bool(self._served and self._served.cpu_row),
        )
        self.diagnosis = diagnosis_text(name, diagnose(figures), in_flight=False)

    def _set_ceiling(self) -> None:
        """A ceiling for a server phasetop did not start: a phasetop simulator's from the flags it publishes;
        a real server's once its model and this host's devices are known: from NVML's GPUs, or the CPU row
        where there is none; the weights from the model id, or their real size (llama.cpp)."""
        if self._ceiling or self.model is None:
            return
        served = ceiling_for(self.simulator_flags, self.model, self.gpu.devices if self.gpu else None,
                             local_port(self.server_url) is not None, self._model_bytes, self.settings.bandwidth_gbs)
        if served is None:
            return
        self._served = served
        self.decode_ceiling_tok_s, self.cpu_ceiling = served.decode_ceiling_tok_s, served.line

    def watch_decode_ceiling_tok_s(self, ceiling_tok_s: float | None) -> None:
        self.server = replace(self.server, ceiling_tok_s=ceiling_tok_s)

    def _set_down(self, down: bool) -> None:
        for pane in self.query(".pane"):
            pane.set_class(down, "-down")


def _said_on(value: str | None) -> bool | None:
    """A config label's boolean ("True"/"False", as vLLM writes them); None when absent or anything else."""
    return {"true": True, "false": False}.get((value or "").lower())
