"""vLLM's `llm_request` spans read into served-request records, and written from them; the window that holds them."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from tests.otlp import record
from tui.core.telemetry.otlp_spans import (
    E2E,
    PROMPT_TOKENS,
    QUEUE,
    export_request,
    read_export,
)
from tui.core.telemetry.served import (REFUSALS, ServedRequest, Tally, TraceWindow, is_sent, match_sent, refused_json,
                                      refused_line, screened)

START_NS = 1_760_000_000_123_456_789
NOW = 1_796_000_000.0
"""2026-12: when the receiver took the spans in."""

VLLM_ATTRIBUTES = {
    # As real vLLM 0.32 sent them for a 9-token prompt and 16 tokens out (shared/real-vllm.md §7).
    "gen_ai.latency.time_in_queue": 5.4e-05,
    "gen_ai.latency.time_to_first_token": 0.094,
    "gen_ai.latency.time_in_model_prefill": 0.040,
    "gen_ai.latency.time_in_model_decode": 0.161,
    "gen_ai.latency.time_in_model_inference": 0.201,
    "gen_ai.latency.e2e": 0.251,
    "gen_ai.usage.prompt_tokens": 9,
    "gen_ai.usage.completion_tokens": 16,
    "gen_ai.request.id": "cmpl-a24e9918ca41f00b-0",
    "gen_ai.request.max_tokens": 16,
    "gen_ai.request.temperature": 1.0,
    "gen_ai.request.top_p": 1.0,
    "gen_ai.request.n": 1,
}


def _value(value) -> AnyValue:
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    return AnyValue(double_value=value)


def _span(name="llm_request", attributes=None, start_ns=START_NS, end_ns=START_NS + 251_000_000, **fields) -> Span:
    pairs = [KeyValue(key=k, value=_value(v)) for k, v in (VLLM_ATTRIBUTES if attributes is None else attributes).items()]
    return Span(name=name, start_time_unix_nano=start_ns, end_time_unix_nano=end_ns, attributes=pairs, **fields)


def _export(*spans: Span, resource=None, **resource_fields) -> ExportTraceServiceRequest:
    attributes = [KeyValue(key=k, value=_value(v)) for k, v in (resource or {"service.name": "vllm", "host.name": "gpu-7"}).items()]
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=attributes, **resource_fields), scope_spans=[ScopeSpans(spans=list(spans))])])


def test_a_vllm_span_is_one_record_with_its_phases_tokens_and_sender():
    batch = read_export(_export(_span()))
    assert batch.rejected == 0 and batch.spans == 1
    [record] = batch.records
    assert record.request_id == "cmpl-a24e9918ca41f00b-0"
    assert record.start_unix == pytest.approx(START_NS / 1e9)
    assert record.end_unix - record.start_unix == pytest.approx(0.251, abs=1e-6)
    assert (record.queue_s, record.prefill_s, record.decode_s) == (5.4e-05, 0.040, 0.161)
    assert (record.ttft_s, record.e2e_s) == (0.094, 0.251)
    assert (record.prompt_tokens, record.completion_tokens) == (9, 16)
    assert (record.service, record.host) == ("vllm", "gpu-7")
    assert record.kv_transfer_s is None and not record.sent_by_phasetop
    # vLLM's e2e holds its API server's time too: 50 ms of it here, shown, not hidden.
    assert record.unaccounted_s == pytest.approx(0.251 - 0.201054)
    assert record.to_json()["unaccounted_s"] == pytest.approx(record.unaccounted_s)
    assert batch.response().SerializeToString() == b""  # all taken: the empty answer OTLP asks for


def test_start_up_spans_are_kept_as_the_cold_start_not_dropped():
    load = _span("Load model", {"code.function": "load_model"}, START_NS, START_NS + 2_500_000_000)
    batch = read_export(_export(load, _span()))
    assert [s.name for s in batch.server_spans] == ["Load model"]
    assert batch.server_spans[0].duration_s == pytest.approx(2.5)
    assert batch.server_spans[0].service == "vllm"
    assert len(batch.records) == 1 and batch.rejected == 0


@pytest.mark.parametrize("change, reason", [
    ({QUEUE: None}, "without gen_ai.latency.time_in_queue"),
    ({E2E: "fast"}, "gen_ai.latency.e2e is a string_value, not a number"),
    ({E2E: -0.5}, "is -0.5, not a duration"),
    ({E2E: math.nan}, "is nan, not a duration"),
    ({E2E: math.inf}, "is inf, not a duration"),
    ({PROMPT_TOKENS: 9.5}, "gen_ai.usage.prompt_tokens is 9.5, not a token count"),
    ({PROMPT_TOKENS: -3}, "is -3, not a token count"),
    ({PROMPT_TOKENS: "nine"}, "is 'nine', not a token count"),
])
def test_a_request_span_it_cannot_trust_is_rejected_and_said_so(change, reason):
    attributes = {k: v for k, v in {**VLLM_ATTRIBUTES, **change}.items() if v is not None}
    batch = read_export(_export(_span(attributes=attributes), _span()))
    assert len(batch.records) == 1  # the good one beside it is kept
    assert batch.rejected == 1 and reason in batch.reject_reason
    answer = batch.response().partial_success
    assert answer.rejected_spans == 1 and reason in answer.error_message


@pytest.mark.parametrize("start_ns, end_ns", [(0, START_NS), (START_NS, START_NS - 1)])
def test_a_request_span_with_unset_or_reversed_times_is_rejected(start_ns, end_ns):
    batch = read_export(_export(_span(start_ns=start_ns, end_ns=end_ns)))
    assert batch.records == [] and batch.rejected == 1


def test_what_the_sender_dropped_is_counted_and_named_in_the_rejection():
    cut = {k: v for k, v in VLLM_ATTRIBUTES.items() if k != PROMPT_TOKENS}
    batch = read_export(_export(_span(attributes=cut, dropped_attributes_count=3, dropped_events_count=2), _span()))
    assert batch.spans_with_dropped_attributes == 1 and batch.dropped_events == 2
    assert "the sender dropped attributes" in batch.reject_reason
    on_resource = read_export(_export(_span(), dropped_attributes_count=1))
    assert on_resource.spans_with_dropped_attributes == 1 and len(on_resource.records) == 1


def test_integer_seconds_and_float_whole_counts_are_read_as_numbers():
    attributes = {**VLLM_ATTRIBUTES, E2E: 1, PROMPT_TOKENS: 9.0}
    [record] = read_export(_export(_span(attributes=attributes))).records
    assert record.e2e_s == 1.0 and record.prompt_tokens == 9


def test_a_senders_text_cannot_act_on_a_terminal():
    resource = {"service.name": "evil\x1b]0;title\x07", "host.name": "h\nost"}
    attributes = {**VLLM_ATTRIBUTES, "gen_ai.request.id": "id\x1b[2J" + "x" * 5000}
    [record] = read_export(_export(_span(attributes=attributes), resource=resource)).records
    assert "\x1b" not in record.service and "\n" not in record.host
    assert "\x1b" not in record.request_id and len(record.request_id) < 300  # capped, with a note of the rest


def test_a_span_written_from_a_record_reads_back_as_that_record():
    record = ServedRequest("cmpl-1-0", 1_760_000_000.25, 1_760_000_001.5, queue_s=0.25, prefill_s=0.125, decode_s=0.875,
                           ttft_s=0.375, e2e_s=1.25, prompt_tokens=2000, completion_tokens=64, kv_transfer_s=0.003)
    wire = export_request([record], "phasetop-sim", "box").SerializeToString()
    [back] = read_export(ExportTraceServiceRequest.FromString(wire)).records
    assert back.request_id == "cmpl-1-0" and (back.service, back.host) == ("phasetop-sim", "box")
    assert back.start_unix == pytest.approx(record.start_unix, abs=1e-6)
    assert back.end_unix == pytest.approx(record.end_unix, abs=1e-6)
    for name in ("queue_s", "prefill_s", "decode_s", "ttft_s", "e2e_s", "kv_transfer_s", "prompt_tokens", "completion_tokens"):
        assert getattr(back, name) == getattr(record, name), name
    span = ExportTraceServiceRequest.FromString(wire).resource_spans[0].scope_spans[0].spans[0]
    assert span.kind == Span.SPAN_KIND_SERVER and len(span.trace_id) == 16 and len(span.span_id) == 8
    names = {a.key for a in span.attributes}
    assert {"gen_ai.latency.time_in_model_inference", "gen_ai.request.id"} <= names


def _record(request_id, start_unix=1000.0) -> ServedRequest:
    return ServedRequest(request_id, start_unix, start_unix + 1, 0, 0.1, 0.9, 0.1, 1, 10, 10)


@pytest.mark.parametrize("span_id, sent, expected", [
    ("cmpl-ab12", {"cmpl-ab12"}, True),
    ("cmpl-ab12-0", {"cmpl-ab12"}, True),  # vLLM's choice suffix
    ("chatcmpl-ab12-3", {"chatcmpl-ab12"}, True),
    ("cmpl-ab12-0", {"cmpl-ab1"}, False),
    ("cmpl-ab12-x", {"cmpl-ab12"}, False),
    ("cmpl-ab12", {"cmpl-ab12-0"}, False),
    (None, {"cmpl-ab12"}, False),
    ("", {""}, False),
])
def test_phasetops_own_requests_are_matched_by_completion_id(span_id, sent, expected):
    assert is_sent(span_id, sent) is expected
    [marked] = match_sent([_record(span_id)], sent)
    assert marked.sent_by_phasetop is expected


def test_the_window_keeps_the_newest_records_and_counts_what_it_pushed_out():
    window = TraceWindow(max_records=3, max_age_s=1e9)
    window.add(_record(f"r{i}", 1000.0 + i) for i in range(5))
    assert [r.request_id for r in window.records] == ["r2", "r3", "r4"]
    assert window.tally.evicted == 2


def test_the_window_forgets_what_it_received_long_before_the_newest_receipt_whatever_the_senders_clock():
    window = TraceWindow(max_records=100, max_age_s=60)
    received = lambda r, at: replace(r, received_unix=at)  # noqa: E731
    window.add([received(_record("old", 1000.0), 5000.0), received(_record("mid", 1050.0), 5050.0)])
    # A sender whose clock is an hour behind: its request is received now, so it is kept, and pushes nothing out.
    window.add([received(_record("behind", 1100.0 - 3600), 5055.0)])
    assert [r.request_id for r in window.records] == ["old", "mid", "behind"] and window.tally.evicted == 0
    window.add([received(_record("new", 1100.0), 5100.0)])  # 100 s after the first receipt: the first ages out
    assert [r.request_id for r in window.records] == ["mid", "behind", "new"]
    assert window.newest_received_unix == 5100.0 and window.tally.evicted == 1


@pytest.mark.parametrize("change, reason", [
    ({"start_unix": NOW + 3600}, "future"),
    ({"start_unix": 946_684_800.0}, "before_2020"),  # 2000-01-01: an RTC never set
    ({"start_unix": NOW - 3 * 86_400, "e2e_s": 2 * 86_400.0, "decode_s": 2 * 86_400.0}, "too_long"),
])
def test_a_span_no_request_could_have_is_refused_by_reason_and_kept_out(change, reason):
    fine, broken = record("fine", NOW - 5), record("broken", **{"start_unix": NOW - 5, **change})
    kept, refused = screened([fine, broken], received_unix=NOW)
    assert [r.request_id for r in kept] == ["fine"] and kept[0].received_unix == NOW
    assert refused == [reason]
    tally = Tally()
    tally.refuse(refused)
    assert refused_json(tally) == {"spans": 1, "by_reason": {key: int(key == reason) for key in REFUSALS}}
    assert refused_line(tally) == f"refused as implausible, kept out of the window: 1 request span {REFUSALS[reason]}"
    assert "refused_spans" not in tally.to_json() and refused_line(Tally()) is None


def test_a_span_from_a_replay_or_a_few_minutes_of_clock_skew_is_taken():
    kept, refused = screened([record("replayed", NOW - 30 * 86_400), record("skewed", NOW + 60)], received_unix=NOW)
    assert [r.request_id for r in kept] == ["replayed", "skewed"] and not refused


def test_refusals_of_several_reasons_are_counted_each():
    tally = Tally()
    tally.refuse(["future", "too_long", "future"])
    assert refused_line(tally) == ("refused as implausible, kept out of the window: 3 request spans: "
                                   f"2 {REFUSALS['future']}; 1 {REFUSALS['too_long']}")
    assert refused_json(tally)["spans"] == 3 and tally.copy().refused_spans is not tally.refused_spans
