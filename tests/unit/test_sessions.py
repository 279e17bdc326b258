"""UI sessions as runs: kind ui with what was sent, one id across saves, bandwidth only while busy, compare's extra
rows, and an older phasetop's sessions (saved as probes) read as UI sessions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import json

from tui.core.runs.compare_text import figure_delta, figure_value
from tui.core.measure.records import RequestTiming
from tui.core.measure.sends import Send
from tui.core.runs.run_record import compare_runs, new_run, run_header
from tui.core.runs.sessions import SESSION_SOURCE, Session, compare_sessions, read_as_ui_session, session_run
from tui.core.telemetry.readings import GpuReading, GpuSample, MetricsSnapshot

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


SHORT = Send(1, "short 200", None, 200, 1, 128)
EIGHT = Send(2, "8 at once", None, 200, 8, 512)
TYPED = Send(10, "typed", "my secret question", None, 1, 128)


def timing(ttft_s: float, itl_s: float, tokens: int = 5, sent_unix: float = T0.timestamp()) -> RequestTiming:
    offsets = tuple(ttft_s + i * itl_s for i in range(tokens))
    return RequestTiming(ok=True, t_sent_unix=sent_unix, token_offsets_s=offsets, prompt_tokens=200, output_tokens=tokens)


def metrics(running: float, waiting: float = 0.0, kv: float = 0.1) -> MetricsSnapshot:
    return MetricsSnapshot(t_unix=0.0, engine="vllm", window_s=1.0, running=running, waiting=waiting, kv_cache_usage=kv)


def gpu(gbs: float | None, busy: float) -> GpuSample:
    return GpuSample(t_unix=0.0, devices=(GpuReading(index="0", name="H100", mem_bw_gbs=gbs, mem_bw_util=busy),))


def session(number: int = 1, flags: dict | None = None, start: float = 100.0) -> Session:
    identity = {"url": "http://h:8000", "kind": "openai", "model": "m", "version": "0.33.0", "max_model_len": 4096,
                "engine_config": None, "process_start_time": start, "simulator_flags": flags}
    return Session(number, T0, "http://h:8000", identity=identity)


def test_a_session_is_a_ui_run_with_what_it_sent_and_its_figures():
    s = session()
    for send in (SHORT, EIGHT, SHORT, TYPED):
        s.add_send(send, T0.timestamp())
    s.add_request(timing(0.010, 0.005))
    s.add_request(timing(0.030, 0.005))
    s.add_metrics(metrics(running=2, waiting=3, kv=0.9))
    s.add_metrics(metrics(running=0, waiting=0, kv=0.2))
    s.decode_ceiling_tok_s = 400.0
    run = session_run(s, T0)
    assert run["kind"] == "ui" and run["params"] == {"source": SESSION_SOURCE, "sent": {
        "short 200": {"sends": 2, "concurrency": 1, "prompt_tokens": 200, "max_tokens": 128},
        "8 at once": {"sends": 1, "concurrency": 8, "prompt_tokens": 200, "max_tokens": 512},
        "typed": {"sends": 1, "concurrency": 1, "prompt_tokens": None, "max_tokens": 128},
    }}
    assert "my secret question" not in json.dumps(run), "a typed prompt is counted, never kept"
    assert run["server"]["model"] == "m" and len(run["requests"]) == 2
    result = run["result"]
    assert result["summary"]["ttft_s"]["p50"] == pytest.approx(0.020)
    assert result["metrics"]["peak_waiting"] == 3 and result["metrics"]["peak_kv_cache_usage"] == 0.9
    assert result["metrics"]["last"]["kv_cache_usage"] == 0.2
    assert result["bw_share_of_ceiling"] == pytest.approx(200.0 / 400.0)  # decode 200 tok/s of a 400 ceiling
    header = run_header(run)
    assert header["kind_name"] == "UI session"
    assert header["summary"].startswith("2 requests sent as short 200 ×2 + 8 at once ×1 + typed ×1, TTFT p50 20.0 ms")


def test_since_a_moment_a_session_run_holds_only_what_was_sent_from_then():
    s = session()
    s.add_send(TYPED, 100.0)
    s.add_request(timing(0.010, 0.005, sent_unix=100.1))
    s.add_send(EIGHT, 200.0)
    s.add_request(timing(0.030, 0.005, sent_unix=200.1))
    run = session_run(s, T0, since_unix=200.0)
    assert list(run["params"]["sent"]) == ["8 at once"]
    assert [r["t_sent_unix"] for r in run["requests"]] == [200.1]


def test_an_older_phasetops_ui_session_saved_as_a_probe_is_read_as_a_ui_session():
    older = new_run("probe", {"source": SESSION_SOURCE}, {"url": "http://h:8000"}, [], {}, T0, T0)
    read = read_as_ui_session(older)
    assert read["kind"] == "ui" and run_header(read)["kind_name"] == "UI session"
    probe = new_run("probe", {"max_tokens": 8}, {"url": "http://h:8000"}, [], {}, T0, T0)
    assert read_as_ui_session(probe) is probe, "a probe is a probe"
    s = session()
    s.add_send(SHORT, T0.timestamp())
    assert compare_runs(read, session_run(s, T0))["workload_differs"] == ["sent (none) → short 200 ×1"], (
        "what the older one sent was not kept: said, not taken as the same")


def test_saving_again_keeps_the_id_so_one_file_is_replaced():
    s = session()
    first = session_run(s, T0)
    s.add_request(timing(0.01, 0.005))
    second = session_run(s, T0)
    assert first["id"] == second["id"] == s.run_id
    assert len(second["requests"]) == 1 and len(first["requests"]) == 0


def test_bandwidth_is_read_only_while_the_server_is_busy():
    s = session()
    s.add_gpu(gpu(3000.0, 0.9))  # no metrics yet: not known busy
    s.add_metrics(metrics(running=0))
    s.add_gpu(gpu(100.0, 0.02))  # idle
    s.add_metrics(metrics(running=4))
    s.add_gpu(gpu(2000.0, 0.6))
    s.add_gpu(gpu(None, 0.8))  # busy share only (no GPM)
    result = session_run(s, T0)["result"]
    assert result["gpu_bw_gbs"] == 2000.0
    assert result["gpu_mem_busy"] == pytest.approx(0.7)
    assert result["gpu_samples"] == 2


def test_a_session_without_identity_still_saves_its_url():
    s = Session(1, T0, "http://h:9000")
    run = session_run(s, T0)
    assert run["server"]["url"] == "http://h:9000" and run["server"]["simulator_flags"] is None


def test_compare_sessions_names_the_flag_and_adds_bandwidth_rows():
    before, after = session(1, {"max_num_batched_tokens": "2048"}), session(2, {"max_num_batched_tokens": "256"}, start=200.0)
    before.add_request(timing(0.070, 0.005))
    after.add_request(timing(0.110, 0.005))
    for s, gbs in ((before, 2000.0), (after, 1800.0)):
        s.add_metrics(metrics(running=1))
        s.add_gpu(gpu(gbs, 0.6))
    comparison = compare_sessions(session_run(before, T0), session_run(after, T0))
    assert {"key": "max_num_batched_tokens", "before": "2048", "after": "256", "source": "simulator_flags"} in comparison["config_diff"]
    assert comparison["restarted"] is True
    rows = {f["figure"]: f for f in comparison["figures"]}
    assert rows["ttft_s"]["delta"] == pytest.approx(0.040)
    assert rows["gpu_bw_gbs"]["before"] == 2000.0 and rows["gpu_bw_gbs"]["delta"] == -200.0
    assert "bw_share_of_ceiling" not in rows  # no ceiling known on either side: no row


def test_compare_sessions_of_plain_runs_adds_nothing():
    plain = session_run(session(), T0)
    plain["result"] = {}
    assert [f["figure"] for f in compare_sessions(plain, plain)["figures"]] == [
        "ttft_s", "ttft_s", "itl_s", "itl_s", "itl_s", "tpot_s", "decode_tok_s", "prefill_tok_s", "e2e_s"]


@pytest.mark.parametrize(("value", "delta", "pct", "unit", "shown", "change"), [
    (0.0123, 0.004, 48.0, "s", "12.30 ms", "+4.00 ms (+48.0 %)"),
    (0.886, 0.087, 9.8, "share", "88.6 %", "+8.7 points (+9.8 %)"),
    (2040.0, -200.0, None, "GB/s", "2,040.0 GB/s", "-200.0 GB/s"),
    (None, None, None, "req/s", "-", "-"),
])
def test_figures_read_in_their_units(value, delta, pct, unit, shown, change):
    assert figure_value(value, unit) == shown
    assert figure_delta(delta, pct, unit) == change
