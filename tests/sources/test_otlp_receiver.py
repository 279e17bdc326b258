"""The OTLP/HTTP receiver on a loopback port: what a real exporter sends is taken in; what a hostile or broken
sender sends is refused with OTLP's error status, memory stays bounded, and the next export is still answered."""

from __future__ import annotations

import asyncio
import gzip
import socket
import time

import httpx
import pytest
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tests.hostile import bomb
from tests.otlp import PROTOBUF_HEADERS, export_bytes, receiving, record, wait_for_records
from tui.core.telemetry.otlp_spans import PROMPT_TOKENS, export_request, request_span

MB = 1024 * 1024


def _refusal(response: httpx.Response) -> str:
    """The reason OTLP's error body (a protobuf google.rpc.Status) gives."""
    assert response.headers["content-type"] == "application/x-protobuf"
    return status_pb2.Status.FromString(response.content).message


def _still_answers(url: str) -> None:
    answer = httpx.post(url, content=export_bytes(record("after")), headers=PROTOBUF_HEADERS, timeout=10)
    assert answer.status_code == 200, answer.content
    assert ExportTraceServiceResponse.FromString(answer.content) == ExportTraceServiceResponse()


def test_an_export_is_taken_in_and_answered_as_otlp_asks():
    with receiving() as (receiver, url):
        answer = httpx.post(url, content=export_bytes(record("cmpl-a-0"), record("cmpl-b-0")), headers=PROTOBUF_HEADERS)
        assert answer.status_code == 200 and answer.headers["content-type"] == "application/x-protobuf"
        assert not ExportTraceServiceResponse.FromString(answer.content).HasField("partial_success")
        records = wait_for_records(receiver, 2)
    assert [r.request_id for r in records] == ["cmpl-a-0", "cmpl-b-0"]
    assert (records[0].service, records[0].host, records[0].prompt_tokens) == ("vllm", "gpu-1", 200)
    assert receiver.window.tally.posts == 1 and receiver.window.tally.spans == 2


def test_a_gzip_export_is_inflated_as_a_collector_sends_it():
    with receiving() as (receiver, url):
        answer = httpx.post(url, content=gzip.compress(export_bytes()), headers={**PROTOBUF_HEADERS, "content-encoding": "gzip"})
        assert answer.status_code == 200
        assert len(wait_for_records(receiver, 1)) == 1


def test_spans_it_cannot_read_are_answered_as_a_partial_success():
    bad = request_span(record("bad"))
    del bad.attributes[:]  # an llm_request span with no attribute at all
    export = export_request([record("good")], "vllm")
    export.resource_spans[0].scope_spans[0].spans.append(bad)
    with receiving() as (receiver, url):
        answer = httpx.post(url, content=export.SerializeToString(), headers=PROTOBUF_HEADERS)
        partial = ExportTraceServiceResponse.FromString(answer.content).partial_success
        assert answer.status_code == 200
        assert partial.rejected_spans == 1 and "without gen_ai.latency" in partial.error_message
        assert [r.request_id for r in wait_for_records(receiver, 1)] == ["good"]
        assert receiver.window.tally.rejected_spans == 1


@pytest.mark.parametrize("body, headers, status, reason", [
    (b"\x0a\xff\xff\xff\xff\x0f", PROTOBUF_HEADERS, 400, "its protobuf does not decode"),
    (b"hello world, not a protobuf", PROTOBUF_HEADERS, 400, "not an OTLP trace export"),
    (b'{"resourceSpans": []}', {"content-type": "application/json"}, 415, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf"),
    (b"x", {}, 415, "got no content type"),
    (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\xff" * 20, {**PROTOBUF_HEADERS, "content-encoding": "gzip"}, 400, "does not inflate"),
    (gzip.compress(b"\x0a\x00" * 1000, mtime=0)[:-12], {**PROTOBUF_HEADERS, "content-encoding": "gzip"}, 400, "cut short"),
    (b"x", {**PROTOBUF_HEADERS, "content-encoding": "br"}, 415, "Content-Encoding 'br' is not read"),
])
def test_a_malformed_export_is_refused_with_otlps_status_and_the_receiver_goes_on(body, headers, status, reason):
    with receiving() as (receiver, url):
        answer = httpx.post(url, content=body, headers=headers)
        assert answer.status_code == status
        assert reason in _refusal(answer)
        assert receiver.window.tally.refused_posts == 1 and reason in receiver.last_refusal
        _still_answers(url)


def test_wrong_paths_and_methods_are_answered_not_served():
    with receiving() as (_, url):
        base = url.removesuffix("/v1/traces")
        missing = httpx.post(base + "/v1/metrics", content=b"", headers=PROTOBUF_HEADERS)
        assert missing.status_code == 404 and "POST /v1/traces" in _refusal(missing)
        got = httpx.get(url)
        assert got.status_code == 405 and got.headers["allow"] == "POST"
        _still_answers(url)


def test_a_100_mb_export_is_refused_from_its_length_before_a_byte_of_it_is_read():
    with receiving() as (receiver, url):
        host, port = httpx.URL(url).host, httpx.URL(url).port
        with socket.create_connection((host, port), timeout=10) as sock:
            sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                         b"Content-Length: %d\r\n\r\n" % (100 * MB))  # the head only: no body is ever sent
            answer = b""
            while part := sock.recv(65536):  # the receiver closes the connection once it has answered
                answer += part
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 413 "), head[:80]
        assert "at most" in status_pb2.Status.FromString(body).message
        _still_answers(url)
        assert receiver.window.tally.refused_posts == 1


def test_a_100_mb_chunked_export_is_cut_off_once_past_the_limit():
    sent = 0

    def body():  # 100 MB streamed a megabyte at a time: never built in memory, here or there
        nonlocal sent
        piece = b"\x00" * MB
        for _ in range(100):
            sent += len(piece)
            yield piece

    with receiving() as (receiver, url):
        try:
            answer = httpx.post(url, content=body(), headers=PROTOBUF_HEADERS, timeout=30)
            assert answer.status_code == 413
        except httpx.TransportError:
            pass  # the receiver closed the connection while the rest was still being written: refused all the same
        assert sent < 50 * MB, f"{sent / MB:.0f} MB were taken before the receiver stopped reading"
        assert receiver.window.tally.refused_posts == 1
        _still_answers(url)


def test_a_gzip_bomb_stops_inflating_at_the_limit():
    with receiving(max_decoded_bytes=8 * MB) as (_, url):
        answer = httpx.post(url, content=bomb(64), headers={**PROTOBUF_HEADERS, "content-encoding": "gzip"})
        assert answer.status_code == 413 and "once inflated" in _refusal(answer)
        _still_answers(url)


async def test_a_body_that_trickles_in_is_cut_at_the_deadline():
    with receiving(body_deadline_s=0.5) as (receiver, url):
        async def trickle():
            for _ in range(40):
                yield b"\x0a"
                await asyncio.sleep(0.1)

        async with httpx.AsyncClient(timeout=10) as client:
            try:
                answer = await client.post(url, content=trickle(), headers=PROTOBUF_HEADERS)
                assert answer.status_code == 408
            except httpx.TransportError:
                pass  # closed under the writer: cut all the same
        assert "took over 0.5 s" in receiver.last_refusal
        _still_answers(url)


async def test_a_flood_of_small_exports_is_held_to_the_window_and_counted():
    posts, per_post = 300, 5
    with receiving() as (receiver, url):
        receiver.window.max_records = 500
        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=4)) as client:
            async def send(i: int) -> int:
                body = export_bytes(*(record(f"r{i}-{k}", 1_760_000_000.0 + i) for k in range(per_post)))
                return (await client.post(url, content=body, headers=PROTOBUF_HEADERS)).status_code

            statuses = await asyncio.gather(*(send(i) for i in range(posts)))
        assert statuses == [200] * posts
        tally = receiver.window.tally
        assert len(receiver.window.records) == 500  # the newest; the other 1,000 counted as pushed out
        assert tally.posts == posts and tally.evicted == posts * per_post - 500
        _still_answers(url)


def test_a_span_from_a_clock_far_ahead_is_refused_and_pushes_no_real_request_out():
    """Aged by the sender's clock, one span stamped a year ahead made every real request look a year old."""
    now = time.time()
    real = [record(f"cmpl-real-{i}", now - 10 + i) for i in range(3)]
    ahead = record("cmpl-ahead-0", now + 365 * 86_400)
    with receiving() as (receiver, url):
        httpx.post(url, content=export_bytes(*real), headers=PROTOBUF_HEADERS)
        answer = httpx.post(url, content=export_bytes(ahead, record("cmpl-real-3", now - 5)), headers=PROTOBUF_HEADERS)
        partial = ExportTraceServiceResponse.FromString(answer.content).partial_success
        assert answer.status_code == 200
        assert partial.rejected_spans == 1 and "stamped in the future" in partial.error_message
        records = wait_for_records(receiver, 4)
        assert [r.request_id for r in records] == [*(r.request_id for r in real), "cmpl-real-3"]
        assert all(now - 1 <= r.received_unix <= time.time() for r in records)
        tally = receiver.window.tally
        assert tally.refused_spans == {"future": 1} and tally.evicted == 0
        _still_answers(url)


def test_the_real_opentelemetry_exporter_is_read(monkeypatch):
    """The SDK's own OTLP/HTTP exporter (what vLLM runs), with a span shaped as vLLM's."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import SpanKind

    with receiving() as (receiver, url):
        provider = TracerProvider(resource=Resource.create({"service.name": "vllm-test", "host.name": "box"}))
        exporter = OTLPSpanExporter(endpoint=url, timeout=10)
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=100))
        start_ns = time.time_ns()
        span = provider.get_tracer("vllm.llm_engine").start_span("llm_request", kind=SpanKind.SERVER, start_time=start_ns)
        span.set_attributes({"gen_ai.latency.time_in_queue": 0.001, "gen_ai.latency.time_to_first_token": 0.05,
                             "gen_ai.latency.time_in_model_prefill": 0.04, "gen_ai.latency.time_in_model_decode": 0.2,
                             "gen_ai.latency.e2e": 0.25, PROMPT_TOKENS: 9, "gen_ai.usage.completion_tokens": 16,
                             "gen_ai.request.id": "cmpl-real-0"})
        span.end(end_time=start_ns + 250_000_000)
        assert provider.force_flush(10_000)
        [served] = wait_for_records(receiver, 1)
        provider.shutdown()
    assert served.request_id == "cmpl-real-0" and (served.service, served.host) == ("vllm-test", "box")
    assert (served.queue_s, served.prefill_s, served.decode_s, served.e2e_s) == (0.001, 0.04, 0.2, 0.25)
    assert (served.prompt_tokens, served.completion_tokens) == (9, 16)
    assert served.start_unix == pytest.approx(start_ns / 1e9, abs=1e-6)
