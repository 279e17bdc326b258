"""`sim --otlp-traces-endpoint`: one vLLM-shaped span per finished request, on loopback into phasetop's receiver; the
phases add up to E2E, the token counts are the answer's, phasetop's sends are found by completion id, and a slow or
dead collector costs spans, never serving."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from tests.loopback import closed_port_url, free_port, wait_listening
from tests.otlp import receiving, record, wait_for_records
from tui.core.telemetry.served import match_sent
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sim.span_export import SpanExporter


def _probe(url: str, *extra: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "tui", "probe", "--url", url, "--max-tokens", "16", "--json", *extra],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _plain_completion(url: str, chat: bool = False) -> dict:
    """A client that is not phasetop: one non-streamed answer."""
    path, body = ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi there"}]}) if chat else (
        "/v1/completions", {"prompt": "a plain client's prompt"})
    answer = httpx.post(url + path, json={**body, "max_tokens": 7}, timeout=30)
    assert answer.status_code == 200
    return answer.json()


def test_each_request_phasetop_sent_comes_back_as_its_span_with_exact_phases_and_tokens():
    with receiving() as (receiver, endpoint):
        with SimulatorProcess.start(["--otlp-traces-endpoint", endpoint]) as sim:
            probed = _probe(sim.url, "--repeat", "3", "--prompt-tokens", "300", "--no-save")
            plain = _plain_completion(sim.url, chat=True)
            records = wait_for_records(receiver, 4)
    sent = [r["completion_id"] for r in probed["requests"]]
    assert all(i and i.startswith("cmpl-") for i in sent)
    marked = {r.request_id: r for r in match_sent(records, set(sent))}
    assert set(marked) == {f"{i}-0" for i in sent} | {plain["id"]}  # a chat span carries the id as is, as vLLM's
    assert not marked[plain["id"]].sent_by_phasetop and marked[plain["id"]].completion_tokens == 7
    for request in probed["requests"]:
        served = marked[f"{request['completion_id']}-0"]
        assert served.sent_by_phasetop
        assert served.queue_s + served.prefill_s + served.decode_s == pytest.approx(served.e2e_s, abs=1e-3)
        assert served.ttft_s == pytest.approx(served.queue_s + served.prefill_s, abs=1e-9)
        assert (served.prompt_tokens, served.completion_tokens) == (request["prompt_tokens"], request["output_tokens"]) == (300, 16)
        assert served.service == "phasetop-sim" and served.host == socket.gethostname()
        assert served.start_unix == pytest.approx(request["t_sent_unix"], abs=0.5)
        assert served.kv_transfer_s is None


def test_traces_marks_what_phasetop_sent_among_everyone_elses(tmp_path):
    """The whole path headless: `traces --json` listening, the simulator exporting, a probe saving its run, and a
    plain client beside it."""
    port = free_port()
    env = {"PHASETOP_RUNS_DIR": str(tmp_path)}
    traces = subprocess.Popen([sys.executable, "-m", "tui", "traces", "--otlp", str(port), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**_environ(), **env})
    try:
        wait_listening(port)
        with SimulatorProcess.start(["--otlp-traces-endpoint", f"http://127.0.0.1:{port}/v1/traces"]) as sim:
            probed = subprocess.run([sys.executable, "-m", "tui", "probe", "--url", sim.url, "--repeat", "2",
                                     "--max-tokens", "8", "--json"], capture_output=True, text=True, timeout=120,
                                    env={**_environ(), **env})
            assert probed.returncode == 0, probed.stderr
            plain = _plain_completion(sim.url)
            time.sleep(1.5)  # the simulator sends what finished within half a second
        traces.send_signal(signal.SIGINT)  # Ctrl-C: stop listening, print what came
        out, err = traces.communicate(timeout=30)
    finally:
        traces.kill()
    assert traces.returncode == 0, err
    document = json.loads(out)
    assert document["interrupted"] is True
    by_id = {r["request_id"]: r for r in document["records"]}
    mine = {f"{r['completion_id']}-0" for r in json.loads(probed.stdout)["requests"]}
    assert set(by_id) == mine | {f"{plain['id']}-0"}
    assert all(by_id[i]["sent_by_phasetop"] for i in mine)
    assert by_id[f"{plain['id']}-0"]["sent_by_phasetop"] is False
    assert document["summary"]["sent_by_phasetop"] == 2 and document["counts"]["refused_posts"] == 0


def test_the_disaggregated_simulator_adds_its_kv_transfer_and_exports_once_per_request():
    with receiving() as (receiver, endpoint):
        with SimulatorProcess.start(["--disaggregated", "--otlp-traces-endpoint", endpoint]) as sim:
            probed = _probe(sim.url, "--prompt-tokens", "2000", "--no-save")
            transfers = httpx.get(sim.url + "/sim/transfers").json()["transfers"]
            [served] = wait_for_records(receiver, 1)
            time.sleep(1.0)  # a worker's own span, were there one, would have come by now
            assert len(receiver.window.records) == 1
    [transfer] = transfers
    assert served.kv_transfer_s == pytest.approx(transfer["seconds"], rel=1e-9)
    assert 0 < served.kv_transfer_s < served.prefill_s  # the move sits inside the prefill, as the wire says
    assert served.queue_s + served.prefill_s + served.decode_s == pytest.approx(served.e2e_s, abs=1e-3)
    assert (served.prompt_tokens, served.completion_tokens) == (probed["requests"][0]["prompt_tokens"], 16)


def test_a_dead_collector_costs_spans_not_answers():
    with SimulatorProcess.start(["--otlp-traces-endpoint", closed_port_url() + "/v1/traces"]) as sim:
        probed = _probe(sim.url, "--repeat", "2", "--no-save")
        deadline = time.monotonic() + 10
        while "spans dropped" not in sim.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        log = sim.log_text()
    assert all(r["ok"] for r in probed["requests"])
    assert "cannot send spans to" in log and "serving goes on" in log


def test_a_dead_collector_is_said_once_however_many_batches_it_loses(capfd):
    exporter = SpanExporter(closed_port_url() + "/v1/traces", delay_s=0.02)
    exporter.start()
    for i in range(3):
        exporter.offer(record(f"r{i}"))
        time.sleep(0.15)  # one batch each
    exporter.stop()
    err = capfd.readouterr().err
    assert exporter.dropped == 3 and exporter.exported == 0
    assert err.count("cannot send spans to") == 1
    assert "0 spans exported to" in err and "3 dropped" in err


def test_offering_a_span_never_waits_on_a_collector_that_hangs(capfd):
    with socket.socket() as hung:  # accepts connections, never answers
        hung.bind(("127.0.0.1", 0))
        hung.listen()
        exporter = SpanExporter(f"http://127.0.0.1:{hung.getsockname()[1]}/v1/traces", max_queue=50, max_batch=10,
                                delay_s=0.05, timeout_s=30)
        exporter.start()
        started = time.perf_counter()
        for i in range(200):
            exporter.offer(record(f"r{i}"))
        offered_s = time.perf_counter() - started
        stop_started = time.perf_counter()
        exporter.stop(flush_timeout_s=0.5)
        stop_s = time.perf_counter() - stop_started
    for thread in threading.enumerate():  # the listener is gone: the send it hung in fails, and the thread ends
        if thread.name == "sim-span-export":
            thread.join(10)
    assert "cannot send spans to" in capfd.readouterr().err
    assert offered_s < 0.1  # 200 appends, none waiting on the send under way
    assert stop_s < 2  # the shutdown waits its flush timeout, not the export's 30 s
    assert exporter.dropped >= 200 - 50 - 10 and exporter.exported == 0  # the queue's room, and one batch in flight


def test_a_full_queue_drops_and_counts_the_newest():
    exporter = SpanExporter("http://127.0.0.1:9/v1/traces", max_queue=5)  # never started: nothing leaves the queue
    for i in range(8):
        exporter.offer(record(f"r{i}"))
    assert exporter.dropped == 3


def test_a_partial_success_is_counted_as_dropped():
    with receiving() as (receiver, endpoint):
        exporter = SpanExporter(endpoint, delay_s=0.05)
        exporter.start()
        exporter.offer(record("fine"))
        exporter.offer(record("negative", queue_s=-1.0))  # the receiver rejects a negative duration
        deadline = time.monotonic() + 10
        while exporter.exported + exporter.dropped < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        exporter.stop()
    assert (exporter.exported, exporter.dropped) == (1, 1)
    assert receiver.window.tally.rejected_spans == 1


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PHASETOP_")}


