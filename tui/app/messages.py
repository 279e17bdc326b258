"""Messages workers post to the main screen: past-tense facts, never commands."""

from __future__ import annotations

from textual.message import Message

from tui.core.measure.records import RequestTiming
from tui.core.state.live import LaneTokens
from tui.core.state.tuning_loop import Refusal
from tui.core.telemetry.readings import GpuSample, HostSample, MetricsSnapshot


class Fact(Message, bubble=False):
    """A worker's message to the screen that runs it; the screen handles it, nothing above."""


class LatestFact(Fact):
    """A sample where only the newest matters: an unhandled older one of the same kind is dropped."""

    def can_replace(self, message: Message) -> bool:
        return type(message) is type(self)


class RequestStarted(Fact):
    """A request was sent."""

    def __init__(self, request_id: int, label: str, t_sent_unix: float, prompt_tokens: int | None,
                 load: bool = False) -> None:
        super().__init__()
        self.request_id = request_id
        self.load = load
        """One of the load dial's: on the timeline, not the prompt pane's answer nor the session's requests (the
        load is saved as its own run)."""
        self.prompt_tokens = prompt_tokens
        """The prompt's length as counted before sending, when it was."""
        self.label = label
        """What the timeline lane is called ("short 200", "typed")."""
        self.t_sent_unix = t_sent_unix


class RequestOnWire(Fact):
    """A started request's body went on the wire (its meter's exact stamp; `RequestStarted` gave the moment it was
    asked for, so its lane shows at once, and a request that never got there still ends on it)."""

    def __init__(self, request_id: int, t_sent_unix: float) -> None:
        super().__init__()
        self.request_id = request_id
        self.t_sent_unix = t_sent_unix


class TokenBatch(Fact):
    """Every stream's chunks since the last batch (about every 50 ms), one aggregate per lane: the screen
    walks lanes, not tokens."""

    def __init__(self, lanes: tuple[LaneTokens, ...]) -> None:
        super().__init__()
        self.lanes = lanes


class RequestCompleted(Fact):
    """A request ended, well or not; `timing` is the exact record."""

    def __init__(self, request_id: int, timing: RequestTiming, load: bool = False) -> None:
        super().__init__()
        self.request_id = request_id
        self.timing = timing
        self.load = load
        """One of the load dial's (see `RequestStarted.load`): its failures are the dial's to count."""


class ClientSampled(LatestFact):
    """The meter processes' CPU (they read and stamp the streams; this UI only draws). Latest wins."""

    def __init__(self, cpu_pct: float | None) -> None:
        super().__init__()
        self.cpu_pct = cpu_pct
        """Percent of one core over their latest interval (100 = one core busy); None while they read nothing."""


class MeterDied(Fact):
    """A meter process died; its streams in flight ended as failed requests (what they read kept), and the next
    send starts a new one."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


class MetricsScraped(LatestFact):
    """A new /metrics snapshot, and the scraper's generation it was read in (`MetricsScraper.generation`). Latest
    wins: an older unhandled one is dropped."""

    def __init__(self, snapshot: MetricsSnapshot, generation: int = 0) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.generation = generation


class MetricsUnavailable(Fact):
    """The server has no usable /metrics (say why)."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


class GpuSampled(LatestFact):
    """A new NVML sample. Latest wins."""

    def __init__(self, sample: GpuSample) -> None:
        super().__init__()
        self.sample = sample


class HostSampled(LatestFact):
    """A new psutil sample. Latest wins."""

    def __init__(self, sample: HostSample) -> None:
        super().__init__()
        self.sample = sample


class ServerWentDown(Fact):
    """The server stopped answering at `since` (unix time)."""

    def __init__(self, since: float, reason: str) -> None:
        super().__init__()
        self.since = since
        self.reason = reason


class ServerCameUp(Fact):
    """The server answers (again); what it is."""

    def __init__(self, kind: str, model: str | None, max_model_len: int | None, version: str | None,
                 model_bytes: int | None = None, fresh: bool | None = None) -> None:
        super().__init__()
        self.kind = kind
        self.model = model
        self.max_model_len = max_model_len
        self.version = version
        self.model_bytes = model_bytes
        """The weights' real size, where the server reports it (llama.cpp)."""
        self.fresh = fresh
        """True when it had served no generation request since it started (its /metrics counters all 0), so
        the next request pays its cold start; None when its /metrics cannot say."""


class NotSent(Fact):
    """A send could not begin (the server refused its connections, or its prompts could not be made): `reason` says
    why; `request_ids`: the ids it had been given, none of which will start or complete."""

    def __init__(self, reason: str, request_ids: range) -> None:
        super().__init__()
        self.reason = reason
        self.request_ids = request_ids


class SimulatorExited(Fact):
    """The simulator phasetop started exited without being asked (killed from outside, or it crashed)."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason
        """How it ended and the last line it wrote ("killed by SIGKILL; last said: …")."""


class SimulatorRestarted(Fact):
    """The server phasetop runs (its simulator, or the --serve command's last good flags) was started again on its
    old port after it exited, or could not be (`error` says why)."""

    def __init__(self, error: str | None = None) -> None:
        super().__init__()
        self.error = error


class ServedProgress(Fact):
    """The served command is starting again: seconds so far and its log's last line."""

    def __init__(self, elapsed_s: float, line: str) -> None:
        super().__init__()
        self.elapsed_s = elapsed_s
        self.line = line


class ServedRestarted(Fact):
    """The served command was started again with new flags, or was not (`refusal`: why, and what runs now)."""

    def __init__(self, refusal: Refusal | None = None) -> None:
        super().__init__()
        self.refusal = refusal
