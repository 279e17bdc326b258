"""`phasetop traces`: the receiver headless, one line per served request, a summary, or one JSON document."""

from __future__ import annotations

import json
import re
import socket
import time

import pytest

from tests.cli.running import assert_one_clear_line, run
from tests.loopback import free_port
from tests.otlp import export_bytes, post_when_listening, record
from tui.core.telemetry.otlp_spans import export_request
from tui.runs_store import default_runs_dir, list_runs, load_run


def _start_up_export() -> bytes:
    export = export_request([record("cmpl-x-0")], "vllm", "gpu-1")
    load = export.resource_spans[0].scope_spans[0].spans.add()
    load.name, load.start_time_unix_nano, load.end_time_unix_nano = "Load model", 1_760_000_000_000_000_000, 1_760_000_002_500_000_000
    return export.SerializeToString()


def test_each_served_request_is_a_line_as_it_arrives_then_a_summary(capsys):
    port = free_port()
    poster = post_when_listening(port, _start_up_export(), export_bytes(record("cmpl-y-0", queue_s=1.75, e2e_s=2.75)))
    code, out, err = run(capsys, "traces", "--otlp", str(port), "--duration", "1.5")
    poster.join(5)
    assert code == 0, err
    assert poster.statuses == [200, 200]
    assert f"receiving OTLP/HTTP protobuf spans at http://127.0.0.1:{port}/v1/traces for 1.5 s" in err
    lines = out.splitlines()
    assert "start-up: Load model 2.50 s  vllm@gpu-1" in lines[0]
    assert "cmpl-x-0  queue 250.0 ms  prefill 125.0 ms  decode 875.0 ms  TTFT 375.0 ms  E2E 1,250.0 ms  200→64 tokens" in lines[1]
    assert "cmpl-y-0  queue 1,750.0 ms" in lines[2]
    assert lines[3].startswith("2 requests served over ") and "from vllm@gpu-1" in lines[3]
    assert any(line.startswith("  queue    p50 ") and "(n=2)" in line for line in lines)
    assert "start-up: Load model 2.50 s" in lines[-1]


def test_json_is_one_document_with_the_records_and_what_was_not_taken_in(capsys):
    port = free_port()
    garbage = post_when_listening(port, export_bytes(record("cmpl-z-0")), b"\x0a\xff\xff\xff\xff\x0f", _start_up_export())
    code, out, err = run(capsys, "traces", "--otlp", f"127.0.0.1:{port}", "--duration", "1.5", "--json")
    garbage.join(5)
    assert code == 0, err
    assert garbage.statuses == [200, 400, 200]
    document = json.loads(out)
    assert document["otlp_endpoint"] == f"http://127.0.0.1:{port}/v1/traces"
    assert [r["request_id"] for r in document["records"]] == ["cmpl-z-0", "cmpl-x-0"]
    first = document["records"][0]
    assert {k: first[k] for k in ("queue_s", "prefill_s", "decode_s", "ttft_s", "e2e_s", "prompt_tokens",
                                  "completion_tokens", "service", "host", "sent_by_phasetop")} == {
        "queue_s": 0.25, "prefill_s": 0.125, "decode_s": 0.875, "ttft_s": 0.375, "e2e_s": 1.25, "prompt_tokens": 200,
        "completion_tokens": 64, "service": "vllm", "host": "gpu-1", "sent_by_phasetop": False}
    assert first["start_unix"] == pytest.approx(1_760_000_000.0)
    assert [s["name"] for s in document["server_spans"]] == ["Load model"]
    assert document["counts"]["refused_posts"] == 1 and document["counts"]["posts"] == 2
    assert "protobuf does not decode" in document["last_refusal"]
    assert document["summary"]["requests"] == 2 and document["summary"]["e2e_s"]["p50"] == pytest.approx(1.25)
    # What was received is a run of kind traffic, compared like any other.
    assert "saved run " in err
    [header] = list_runs(default_runs_dir(None))
    run_file = load_run(header["id"], default_runs_dir(None))
    assert run_file["kind"] == "traffic" and run_file["params"] == {"source": "phasetop traces"}
    assert [r["request_id"] for r in run_file["requests"]] == ["cmpl-z-0", "cmpl-x-0"]
    assert run_file["server"]["senders"] == ["vllm@gpu-1"]


@pytest.mark.parametrize("address, words", [
    ("70000", ("--otlp", "0 to 65535")),
    ("gpu.example:4318", ("--otlp", "must be an IP address")),
    ("::1:4318", ("--otlp", "brackets")),
    ("127.0.0.1:", ("--otlp", "not [HOST:]PORT")),
])
def test_a_bad_address_is_one_clear_line(capsys, address, words):
    code, _, err = run(capsys, "traces", "--otlp", address, "--duration", "1")
    assert code == 2
    assert_one_clear_line(code, err, *words)


def test_a_port_in_use_is_one_clear_line(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out, err = run(capsys, "traces", "--otlp", str(port), "--duration", "1", "--json")
    assert code == 1 and out == ""
    assert_one_clear_line(code, err, f"cannot listen on 127.0.0.1:{port}", "in use")


def test_a_duration_must_be_positive(capsys):
    code, _, err = run(capsys, "traces", "--otlp", "0", "--duration", "0")
    assert_one_clear_line(code, err, "--duration must be > 0")



def test_json_counts_the_request_spans_refused_for_their_times_by_reason(capsys):
    now = time.time()
    port = free_port()
    poster = post_when_listening(port, export_bytes(record("cmpl-ok-0", now - 5), record("cmpl-ahead-0", now + 86_400),
                                                    record("cmpl-1970-0", 1_000.0)))
    code, out, err = run(capsys, "traces", "--otlp", str(port), "--duration", "1.5", "--json", "--no-save")
    poster.join(5)
    assert code == 0, err
    document = json.loads(out)
    assert [r["request_id"] for r in document["records"]] == ["cmpl-ok-0"]
    assert document["refused"] == {"spans": 2, "by_reason": {"future": 1, "before_2020": 1, "too_long": 0}}


def test_the_summary_says_one_request_in_the_singular_and_the_refused_in_words(capsys):
    port = free_port()
    poster = post_when_listening(port, export_bytes(record("cmpl-one-0", time.time() - 5), record("cmpl-x-0", 1_000.0)))
    code, out, err = run(capsys, "traces", "--otlp", str(port), "--duration", "1.5", "--no-save")
    poster.join(5)
    assert code == 0, err
    assert re.search(r"^1 request served over [\d.]+ s of listening from vllm@gpu-1$", out, re.M), out
    assert "refused as implausible, kept out of the window: 1 request span stamped before 2020" in out, out
