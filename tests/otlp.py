"""phasetop's OTLP receiver for tests: served from a thread of the test's process on a loopback port; and exports
posted to a `phasetop traces` the test runs.

    with receiving() as (receiver, url):
        httpx.post(url, content=export, headers=PROTOBUF_HEADERS)
        wait_for_records(receiver, 3)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tui.core.telemetry.otlp_spans import export_request
from tui.core.telemetry.served import ServedRequest
from tui.net import url_of
from tui.sources.otlp_receiver import TRACES_PATH, TraceReceiver

PROTOBUF_HEADERS = {"content-type": "application/x-protobuf"}


@contextlib.contextmanager
def receiving(**limits) -> Iterator[tuple[TraceReceiver, str]]:
    """A receiver (with these limits) serving on a free loopback port; its /v1/traces URL."""
    receiver = TraceReceiver(**limits)
    sock = TraceReceiver.bind("127.0.0.1:0")
    ready = threading.Event()
    thread = threading.Thread(target=asyncio.run, args=(receiver.serve(sock, ready.set),), daemon=True,
                              name="otlp-receiver")
    thread.start()
    assert ready.wait(10), "the receiver did not start"
    try:
        yield receiver, url_of(sock) + TRACES_PATH
    finally:
        receiver.stop()
        thread.join(10)


def wait_for_records(receiver: TraceReceiver, count: int, timeout_s: float = 10.0) -> list[ServedRequest]:
    """The receiver's records once it holds `count` of them (AssertionError after `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while len(receiver.window.records) < count:
        assert time.monotonic() < deadline, f"{len(receiver.window.records)} of {count} records after {timeout_s} s"
        time.sleep(0.02)
    return list(receiver.window.records)


def record(request_id: str = "cmpl-1-0", start_unix: float = 1_760_000_000.0, **figures) -> ServedRequest:
    """A served request whose phases add up to its E2E (1.25 s)."""
    values = dict(queue_s=0.25, prefill_s=0.125, decode_s=0.875, ttft_s=0.375, e2e_s=1.25, prompt_tokens=200,
                  completion_tokens=64) | figures
    return ServedRequest(request_id, start_unix, start_unix + values["e2e_s"], **values)


def export_bytes(*records: ServedRequest, service: str = "vllm", host: str = "gpu-1") -> bytes:
    return export_request(records or (record(),), service, host).SerializeToString()


def decoded(body: bytes) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest.FromString(body)


def post_when_listening(port: int, *bodies: bytes, headers=PROTOBUF_HEADERS) -> threading.Thread:
    """From another thread, once something listens on `port` (a `phasetop traces`): POST each body to its
    /v1/traces; the thread's `statuses` are the answers' status codes."""
    statuses: list[int] = []

    def post() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                for body in bodies:
                    statuses.append(httpx.post(f"http://127.0.0.1:{port}{TRACES_PATH}", content=body,
                                               headers=headers).status_code)
                return
            except httpx.ConnectError:
                time.sleep(0.05)

    thread = threading.Thread(target=post, daemon=True)
    thread.statuses = statuses
    thread.start()
    return thread
