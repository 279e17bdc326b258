"""`sim --otlp-traces-endpoint URL`: one `llm_request` span per finished request, as vLLM exports them (OTLP/HTTP
protobuf, its names and attributes), from the simulator's own stamps: its queue, prefill and decode are exact.

Off the serving path, as OpenTelemetry's batch span processor works: the finished request is put in a bounded
queue (an append, on the event loop), and a thread of its own sends the queue every `delay_s` (or as soon as a
batch is full) with a short timeout. A slow or dead collector only costs spans, never a token's time: what the
queue had no room for, and what a failed export carried, is counted (`dropped`) and said once per failure kind.
"""

from __future__ import annotations

import collections
import os
import socket
import sys
import threading

import httpx
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tui.core.telemetry.otlp_spans import export_request
from tui.core.telemetry.served import ServedRequest
from tui.core.untrusted import one_line
from tui.sim.physics import Sequence

MAX_QUEUE = 2048
"""Spans waiting to be sent, at most (OpenTelemetry's batch processor default); a full queue drops the newest."""
MAX_BATCH = 512
DELAY_S = 0.5
"""How long a finished request's span waits at most before it is sent (vLLM's exporter, OTEL_BSP_SCHEDULE_DELAY=500)."""
TIMEOUT_S = 5.0
DEFAULT_SERVICE = "phasetop-sim"


def served_request(sequence: Sequence, request_id: str, loop_now: float, unix_now: float) -> ServedRequest:
    """A finished sequence as vLLM's span tells it: arrival → scheduled → first token → last token, from its own
    stamps (the loop's clock; `loop_now` and `unix_now` are one moment on both clocks, to put it on the wall clock)."""
    to_unix = unix_now - loop_now
    arrival, first, last = sequence.arrival, sequence.first_token_at, sequence.last_token_at
    scheduled = sequence.scheduled_at if sequence.scheduled_at is not None else arrival
    return ServedRequest(
        request_id=request_id, start_unix=arrival + to_unix, end_unix=last + to_unix,
        queue_s=scheduled - arrival, prefill_s=first - scheduled, decode_s=last - first, ttft_s=first - arrival,
        e2e_s=last - arrival, prompt_tokens=sequence.prompt_tokens, completion_tokens=sequence.output_tokens,
        kv_transfer_s=sequence.kv_transfer_s,
    )


class SpanExporter:
    """Sends finished requests' spans to an OTLP/HTTP endpoint from its own thread; `offer` never blocks."""

    def __init__(self, endpoint: str, service: str | None = None, host: str | None = None, max_queue: int = MAX_QUEUE,
                 max_batch: int = MAX_BATCH, delay_s: float = DELAY_S, timeout_s: float = TIMEOUT_S) -> None:
        self.endpoint = endpoint
        self.service = service or os.environ.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE
        self.host = host or socket.gethostname()
        self.max_queue = max_queue
        self.max_batch = max_batch
        self.delay_s = delay_s
        self.timeout_s = timeout_s
        self.exported = 0
        """Spans the endpoint took (answered 2xx), less those it said it rejected."""
        self.dropped = 0
        """Spans lost: no room in the queue, an export that failed, or rejected by the endpoint."""
        self._queue: collections.deque[ServedRequest] = collections.deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._said: set[str] = set()

    def offer(self, record: ServedRequest) -> None:
        """Queue a finished request's span (called on the serving loop: an append, or a count when full)."""
        with self._lock:
            if len(self._queue) >= self.max_queue:
                self.dropped += 1
                return
            self._queue.append(record)
            if len(self._queue) >= self.max_batch:
                self._wake.set()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="sim-span-export", daemon=True)
            self._thread.start()

    def stop(self, flush_timeout_s: float = 2.0) -> None:
        """Send what is queued, waiting at most `flush_timeout_s` (a hung collector does not hold up the shutdown;
        the thread is a daemon), then say what was sent and lost."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(flush_timeout_s)
            self._thread = None
        if self.dropped:
            print(f"phasetop sim: {self.exported} spans exported to {self.endpoint}, {self.dropped} dropped",
                  file=sys.stderr, flush=True)

    def _run(self) -> None:
        with httpx.Client(timeout=self.timeout_s, trust_env=False) as client:
            while True:
                self._wake.wait(self.delay_s)
                self._wake.clear()
                while batch := self._take():
                    self._send(client, batch)
                if self._stopping:
                    return

    def _take(self) -> list[ServedRequest]:
        with self._lock:
            count = min(len(self._queue), self.max_batch)
            return [self._queue.popleft() for _ in range(count)]

    def _send(self, client: httpx.Client, batch: list[ServedRequest]) -> None:
        body = export_request(batch, self.service, self.host).SerializeToString()
        try:
            answer = client.post(self.endpoint, content=body, headers={"content-type": "application/x-protobuf"})
        except httpx.HTTPError as error:
            self._lost(len(batch), f"cannot send spans to {self.endpoint}: {one_line(str(error) or type(error).__name__)}")
            return
        if not answer.is_success:
            self._lost(len(batch), f"{self.endpoint} refused spans: HTTP {answer.status_code}")
            return
        rejected = _rejected(answer.content)
        self.exported += len(batch) - rejected
        if rejected:
            self._lost(rejected, f"{self.endpoint} rejected {rejected} spans")

    def _lost(self, count: int, reason: str) -> None:
        """Count spans lost; say each kind of loss once on stderr (a dead collector is not a line per batch)."""
        self.dropped += count
        kind = reason.partition(":")[0]
        if kind not in self._said:
            self._said.add(kind)
            print(f"phasetop sim: {reason} (spans dropped; serving goes on)", file=sys.stderr, flush=True)


def _rejected(body: bytes) -> int:
    """The partial success's rejected count in an export's answer (0 for an empty or unreadable one)."""
    try:
        return ExportTraceServiceResponse.FromString(body).partial_success.rejected_spans
    except DecodeError:
        return 0
