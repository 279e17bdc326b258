"""OTLP trace spans ↔ served-request records: vLLM's `llm_request` span read into a `ServedRequest`, and written
from one (the simulator exports what vLLM exports). Pure: decoded protobuf messages in, messages out, no IO.

The names are vLLM's (`vllm/tracing`, 0.32; checked against a real server): one `llm_request` span per finished
request, start = arrival, end = finish, latencies in seconds as double attributes, token counts as ints.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from tui.core.telemetry.served import ServedRequest, ServerSpan
from tui.core.untrusted import one_line

REQUEST_SPAN = "llm_request"
QUEUE = "gen_ai.latency.time_in_queue"
TTFT = "gen_ai.latency.time_to_first_token"
PREFILL = "gen_ai.latency.time_in_model_prefill"
DECODE = "gen_ai.latency.time_in_model_decode"
INFERENCE = "gen_ai.latency.time_in_model_inference"
E2E = "gen_ai.latency.e2e"
PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
REQUEST_ID = "gen_ai.request.id"
MAX_TOKENS = "gen_ai.request.max_tokens"
KV_TRANSFER = "phasetop.latency.kv_transfer"
"""The simulator's own attribute (no vLLM name): a disaggregated request's KV move, seconds, inside the prefill."""
SERVICE_NAME = "service.name"
HOST_NAME = "host.name"
SIM_SCOPE = "phasetop.sim"

NS_PER_S = 1e9


@dataclass
class SpanBatch:
    """What one export request held: its requests, its other spans, and what could not be read."""

    records: list[ServedRequest] = field(default_factory=list)
    server_spans: list[ServerSpan] = field(default_factory=list)
    spans: int = 0
    rejected: int = 0
    """`llm_request` spans that are no readable request (answered as OTLP's partial success)."""
    reject_reason: str | None = None
    """Why the first of them was rejected, one line."""
    spans_with_dropped_attributes: int = 0
    dropped_events: int = 0

    def response(self) -> ExportTraceServiceResponse:
        """The answer OTLP asks for: empty when all was taken, else a partial success counting the rejected."""
        if not self.rejected:
            return ExportTraceServiceResponse()
        return ExportTraceServiceResponse(partial_success=ExportTracePartialSuccess(
            rejected_spans=self.rejected, error_message=self.reject_reason or ""))


class Unreadable(ValueError):
    """An `llm_request` span phasetop cannot take as a request; the message says which attribute and why."""


def read_export(request: ExportTraceServiceRequest) -> SpanBatch:
    """Every span of an export: `llm_request` ones as records (or rejected, with the reason), the rest kept apart."""
    batch = SpanBatch()
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        service, host = _text(resource.get(SERVICE_NAME)), _text(resource.get(HOST_NAME))
        dropped_resource = resource_spans.resource.dropped_attributes_count > 0
        for scope_spans in resource_spans.scope_spans:
            dropped_scope = scope_spans.scope.dropped_attributes_count > 0
            for span in scope_spans.spans:
                batch.spans += 1
                batch.dropped_events += span.dropped_events_count
                cut = span.dropped_attributes_count > 0 or dropped_resource or dropped_scope
                batch.spans_with_dropped_attributes += cut
                if span.name != REQUEST_SPAN:
                    if span.start_time_unix_nano and span.end_time_unix_nano >= span.start_time_unix_nano:
                        batch.server_spans.append(ServerSpan(
                            one_line(span.name), span.start_time_unix_nano / NS_PER_S, span.end_time_unix_nano / NS_PER_S,
                            service, host))
                    continue
                try:
                    batch.records.append(read_request_span(span, service, host))
                except Unreadable as error:
                    batch.rejected += 1
                    if batch.reject_reason is None:
                        batch.reject_reason = f"{error}{' (the sender dropped attributes)' if cut else ''}"
    return batch


def read_request_span(span: Span, service: str | None = None, host: str | None = None) -> ServedRequest:
    """An `llm_request` span as a record; Unreadable when an attribute it needs is missing, of the wrong type, or
    not a finite duration or count ≥ 0, or its times are unset or reversed: a guessed figure would be a wrong one."""
    start_ns, end_ns = span.start_time_unix_nano, span.end_time_unix_nano
    if not start_ns or end_ns < start_ns:
        raise Unreadable(f"{REQUEST_SPAN} span with start {start_ns} ns and end {end_ns} ns")
    attributes = _attributes(span.attributes)
    kv = _seconds(attributes, KV_TRANSFER) if KV_TRANSFER in attributes else None
    return ServedRequest(request_id=_text(attributes.get(REQUEST_ID)), start_unix=start_ns / NS_PER_S,
                         end_unix=end_ns / NS_PER_S, queue_s=_seconds(attributes, QUEUE),
                         prefill_s=_seconds(attributes, PREFILL), decode_s=_seconds(attributes, DECODE),
                         ttft_s=_seconds(attributes, TTFT), e2e_s=_seconds(attributes, E2E),
                         prompt_tokens=_count(attributes, PROMPT_TOKENS),
                         completion_tokens=_count(attributes, COMPLETION_TOKENS),
                         service=service, host=host, kv_transfer_s=kv)


def _attributes(pairs: Iterable[KeyValue]) -> dict[str, AnyValue]:
    return {pair.key: pair.value for pair in pairs}


def _text(value: AnyValue | None) -> str | None:
    """A string attribute as one safe line (a sender's text is untrusted); None when absent or not a string."""
    if value is None or value.WhichOneof("value") != "string_value":
        return None
    return one_line(value.string_value)


def _seconds(attributes: dict[str, AnyValue], key: str) -> float:
    value = attributes.get(key)
    if value is None:
        raise Unreadable(f"{REQUEST_SPAN} span without {key}")
    kind = value.WhichOneof("value")
    if kind == "double_value":
        seconds = value.double_value
    elif kind == "int_value":
        seconds = float(value.int_value)
    else:
        raise Unreadable(f"{REQUEST_SPAN} span's {key} is a {kind or 'empty value'}, not a number")
    if not math.isfinite(seconds) or seconds < 0:
        raise Unreadable(f"{REQUEST_SPAN} span's {key} is {seconds}, not a duration")
    return seconds


def _count(attributes: dict[str, AnyValue], key: str) -> int:
    value = attributes.get(key)
    if value is None:
        raise Unreadable(f"{REQUEST_SPAN} span without {key}")
    kind = value.WhichOneof("value")
    if kind == "int_value" and value.int_value >= 0:
        return value.int_value
    if kind == "double_value" and value.double_value >= 0 and value.double_value.is_integer():
        return int(value.double_value)
    shown = getattr(value, kind) if kind else "empty"
    raise Unreadable(f"{REQUEST_SPAN} span's {key} is {one_line(repr(shown), 40)}, not a token count")


def export_request(records: Iterable[ServedRequest], service: str, host: str | None = None,
                   scope: str = SIM_SCOPE) -> ExportTraceServiceRequest:
    """The export request that carries these records as vLLM's spans, from one sender (`service`, `host`)."""
    resource = [KeyValue(key=SERVICE_NAME, value=AnyValue(string_value=service))]
    if host:
        resource.append(KeyValue(key=HOST_NAME, value=AnyValue(string_value=host)))
    spans = [request_span(record) for record in records]
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=resource),
        scope_spans=[ScopeSpans(scope=InstrumentationScope(name=scope), spans=spans)],
    )])


def request_span(record: ServedRequest) -> Span:
    """One record as vLLM's `llm_request` span. Its trace and span ids are drawn from the request id, so the same
    request always makes the same span (a resend is recognisable as one)."""
    digest = hashlib.sha256((record.request_id or f"{record.start_unix!r}").encode()).digest()
    attributes = [
        _double(TTFT, record.ttft_s), _double(E2E, record.e2e_s), _double(QUEUE, record.queue_s),
        _int(PROMPT_TOKENS, record.prompt_tokens), _int(COMPLETION_TOKENS, record.completion_tokens),
        _double(PREFILL, record.prefill_s), _double(DECODE, record.decode_s),
        _double(INFERENCE, record.prefill_s + record.decode_s),
    ]
    if record.request_id is not None:
        attributes.append(KeyValue(key=REQUEST_ID, value=AnyValue(string_value=record.request_id)))
    if record.kv_transfer_s is not None:
        attributes.append(_double(KV_TRANSFER, record.kv_transfer_s))
    return Span(trace_id=digest[:16], span_id=digest[16:24], name=REQUEST_SPAN, kind=Span.SPAN_KIND_SERVER,
                start_time_unix_nano=round(record.start_unix * NS_PER_S), end_time_unix_nano=round(record.end_unix * NS_PER_S),
                attributes=attributes)


def _double(key: str, value: float) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(double_value=value))


def _int(key: str, value: int) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(int_value=value))
