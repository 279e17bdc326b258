"""UI sessions: what the app saw of one server process, kept as a run so "before" and "after" a restart compare.

A session opens when the UI first reaches a server and again each time the metrics scraper sees the
server restart. It holds what the UI sent (its workload) and the requests that came of it, the last metrics,
the GPU bandwidth read while the server was busy, and the server's identity (flags included). `session_run`
turns it into a run record of kind "ui" whose `params.sent` is its workload (`tui.core.runs.sent`), and
`compare_sessions` adds the bandwidth rows `compare_runs` does not know about.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tui.core.measure.aggregates import Distribution, RequestFigures, sample_note
from tui.core.measure.records import RequestTiming
from tui.core.measure.sends import Send
from tui.core.runs.run_record import UI_KIND, compare_runs, new_run, result_figure_rows
from tui.core.runs.sent import SENT_PARAM, SentBatch, tally
from tui.core.telemetry.readings import GpuSample, MetricsSnapshot

SESSION_SOURCE = "ui session"
"""`params.source` of a run saved from a UI session."""
KEEP_SESSION_REQUESTS = 200
"""Raw requests a session keeps (the latest) and saves; its summary is kept over all of them."""

BANDWIDTH_FIGURES = (
    ("gpu_bw_gbs", "GPU bandwidth (busy)", "GB/s"),
    ("gpu_mem_busy", "GPU memory busy", "share"),
    ("bw_share_of_ceiling", "decode ÷ ceiling", "share"),
)
"""(result key, label, unit) of the bandwidth rows; "share" is 0–1, shown as a percentage."""


@dataclass
class Session:
    """One server process as the UI saw it. Mutable: the screen appends to it as facts arrive."""

    number: int
    started: datetime
    url: str
    identity: dict[str, Any] | None = None
    """`server_identity()`'s object, once read; None until then."""
    sends: list[SentBatch] = field(default_factory=list)
    """Every send of the session, in order (a key press each, so few): its workload. Add them with `add_send`."""
    requests: list[RequestTiming] = field(default_factory=list)
    """The latest KEEP_SESSION_REQUESTS requests the UI sent (prompt presets and typed), finished ones
    only, in finishing order: add them with `add_request`."""
    figures: RequestFigures = field(default_factory=RequestFigures)
    """The summary over every request added, kept as they come."""
    request_count: int = 0
    """Requests added, kept or not."""
    last_metrics: MetricsSnapshot | None = None
    peak_kv_cache_usage: float | None = None
    peak_waiting: float | None = None
    gpu_bw_gbs: Distribution = field(default_factory=Distribution)
    """GPM bandwidth samples (GB/s) taken while the server had requests running."""
    gpu_mem_busy: Distribution = field(default_factory=Distribution)
    """NVML memory-busy share (0–1) samples taken while the server had requests running."""
    decode_ceiling_tok_s: float | None = None
    restart_reasons: tuple[str, ...] = ()
    """Why this session began (the scraper's restart reasons); empty for the first."""
    run_id: str | None = None
    """The saved run's id, fixed at the first save so later saves replace the same file."""
    sweeps: dict[str, list[dict[str, Any]]] = field(default_factory=dict[str, Any])
    """The rows of the last run of each experiment on this server, by its `--vary` name (the roofline traces some)."""

    def add_send(self, send: Send, sent_unix: float) -> None:
        self.sends.append(SentBatch.of(send, sent_unix))

    def add_request(self, timing: RequestTiming) -> None:
        self.figures.add(timing)
        self.request_count += 1
        self.requests.append(timing)
        if len(self.requests) > KEEP_SESSION_REQUESTS:
            del self.requests[0]

    def add_metrics(self, snapshot: MetricsSnapshot) -> None:
        self.last_metrics = snapshot
        self.peak_kv_cache_usage = _peak(self.peak_kv_cache_usage, snapshot.kv_cache_usage)
        self.peak_waiting = _peak(self.peak_waiting, snapshot.waiting)

    def add_gpu(self, sample: GpuSample) -> None:
        """Keep the first device's bandwidth, only while the server is busy: idle samples would dilute it."""
        busy = self.last_metrics is not None and bool(self.last_metrics.running)
        if not busy or not sample.devices:
            return
        device = sample.devices[0]
        if device.mem_bw_gbs is not None:
            self.gpu_bw_gbs.add(device.mem_bw_gbs)
        if device.mem_bw_util is not None:
            self.gpu_mem_busy.add(device.mem_bw_util)


class SessionLog:
    """The current session, and the one before the last restart ("before"); older ones are dropped."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sessions: list[Session] = []
        """The one before (if any), then the current."""

    @property
    def current(self) -> Session | None:
        return self.sessions[-1] if self.sessions else None

    @property
    def has_before(self) -> bool:
        return len(self.sessions) > 1

    def open(self, started: datetime, reasons: tuple[str, ...] = ()) -> Session:
        """A new current session; the current one becomes "before"."""
        number = self.sessions[-1].number + 1 if self.sessions else 1
        session = Session(number, started, self.url, restart_reasons=tuple(reasons))
        self.sessions = [*self.sessions[-1:], session]
        return session

    def sent_in(self, t_sent_unix: float) -> Session | None:
        """The session a request sent at `t_sent_unix` belongs to (one sent before a restart may end after it)."""
        return next((s for s in reversed(self.sessions) if s.started.timestamp() <= t_sent_unix), None)

    def identified(self, number: int, identity: dict[str, Any]) -> bool:
        """Give session `number` its identity; True when it is the current one."""
        for session in self.sessions:
            if session.number == number:
                session.identity = identity
        return bool(self.sessions) and number == self.sessions[-1].number


def session_run(session: Session, finished: datetime, since_unix: float | None = None) -> dict[str, Any]:
    """The session as a run record; keeps `session.run_id` once one was given, so saves overwrite one file.

    With `since_unix`, only what was sent from then on (a workload run again after a restart): its sends and their
    requests; the result's summary stays the whole session's."""
    identity = session.identity or {"url": session.url, "kind": None, "model": None, "version": None,
                                    "max_model_len": None, "engine_config": None, "process_start_time": None,
                                    "simulator_flags": None}
    sample = None
    if session.request_count > len(session.requests):
        sample = {**sample_note(len(session.requests), session.request_count, session.figures.exact),
                  "method": f"the latest {len(session.requests)}"}
    since = float("-inf") if since_unix is None else since_unix
    params = {"source": SESSION_SOURCE, SENT_PARAM: tally(b for b in session.sends if b.sent_unix >= since)}
    requests = [r.to_json() for r in session.requests if r.t_sent_unix >= since]
    run = new_run(UI_KIND, params, identity, requests, session_result(session), session.started, finished,
                  requests_sample=sample)
    if session.run_id is None:
        session.run_id = run["id"]
    run["id"] = session.run_id
    return run


def session_result(session: Session) -> dict[str, Any]:
    """The run's `result`: probe's summary, the metrics seen, and bandwidth while busy."""
    summary = session.figures.summary()
    decode_p50 = summary["decode_tok_s"]["p50"]
    ceiling = session.decode_ceiling_tok_s
    metrics = session.last_metrics
    return {
        "source": SESSION_SOURCE,
        "session": session.number,
        "restart_reasons": list(session.restart_reasons),
        "summary": summary,
        "metrics": {
            "last": metrics.to_json() if metrics else None,
            "peak_kv_cache_usage": session.peak_kv_cache_usage,
            "peak_waiting": session.peak_waiting,
        },
        "gpu_bw_gbs": session.gpu_bw_gbs.summary().mean,
        "gpu_mem_busy": session.gpu_mem_busy.summary().mean,
        "gpu_samples": max(session.gpu_bw_gbs.n, session.gpu_mem_busy.n),
        "decode_ceiling_tok_s": ceiling,
        "bw_share_of_ceiling": decode_p50 / ceiling if decode_p50 and ceiling else None,
    }


def compare_sessions(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """`compare_runs`, plus bandwidth rows where either run has them (sessions saved by the UI do)."""
    comparison = compare_runs(before, after)
    comparison["figures"] += result_figure_rows(before, after, BANDWIDTH_FIGURES, "mean")
    return comparison


def read_as_ui_session(run: dict[str, Any]) -> dict[str, Any]:
    """A UI session an older phasetop saved (kind "probe", `params.source` "ui session") as kind "ui"; its sends
    were not kept, so compare says so against one that kept them. Any other run as it is."""
    if run.get("kind") == "probe" and (run.get("params") or {}).get("source") == SESSION_SOURCE:
        return {**run, "kind": UI_KIND}
    return run


def _peak(current: float | None, value: float | None) -> float | None:
    if value is None:
        return current
    return value if current is None else max(current, value)
