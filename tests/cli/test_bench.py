"""`phasetop bench` against the simulator: figures recomputed from the saved requests, goodput, the cap,
a saved run, the server dying mid-run, and the one-line failures."""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

import pytest

from testbeds.scripted_server import Script, ScriptedServer
from tui.cli.main import main
from tui.sources.servers.simulator_server import SimulatorProcess

SECRET = "sk-bench-never-show-4c1d"


@pytest.fixture(scope="module")
def sim():
    with SimulatorProcess.start() as process:
        yield process


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("PHASETOP_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("PHASETOP_API_KEY", raising=False)


def bench(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["bench", *args])
    out, err = capsys.readouterr()
    return code, out, err


def quantiles(values: list[float]) -> dict:
    """Mean, p50, p90, p99 by the standard library (numpy's linear interpolation is its "inclusive" method)."""
    q = statistics.quantiles(values, n=100, method="inclusive")
    return {"mean": statistics.fmean(values), "p50": q[49], "p90": q[89], "p99": q[98], "n": len(values)}


def assert_summary(figure: dict, values: list[float]) -> None:
    expected = quantiles(values)
    assert figure["n"] == expected["n"]
    for stat in ("mean", "p50", "p90", "p99"):
        assert figure[stat] == pytest.approx(expected[stat], rel=1e-9, abs=1e-12), stat


def test_figures_agree_with_the_saved_requests(sim, capsys, tmp_path):
    saved = tmp_path / "out" / "bench.json"
    saved.parent.mkdir()
    code, out, err = bench(capsys, "--url", sim.url, "--num-prompts", "30", "--request-rate", "40", "--prompt-tokens", "120",
                           "--max-tokens", "24", "--slo-ttft-ms", "14", "--slo-tpot-ms", "4.9", "--seed", "5",
                           "--json", "--save", str(saved))
    assert code == 0, err
    document = json.loads(out)
    assert json.loads(saved.read_text()) == document  # --save writes the same document
    assert not list(saved.parent.glob(".*.tmp"))  # the temp file was renamed, not left
    assert "bench: 30/30 done" in err
    requests, f = document["requests"], document["figures"]
    done = [r for r in requests if r["ok"]]
    assert len(requests) == 30 and len(done) == 30 and f["completed"] == 30 and f["failed"] == 0
    assert all(r["prompt_tokens"] == 120 and r["output_tokens"] == 24 for r in done)  # exact via /tokenize, usage agrees

    assert_summary(f["ttft_s"], [r["ttft_s"] for r in done])
    assert_summary(f["e2el_s"], [r["e2e_s"] for r in done])
    assert_summary(f["itl_s"], [gap for r in done for gap in r["itl_s"]])
    tpots = [(r["e2e_s"] - r["ttft_s"]) / (r["output_tokens"] - 1) for r in done]
    assert_summary(f["tpot_s"], tpots)

    ends = [r["t_sent_unix"] + r["e2e_s"] for r in done]
    duration = f["duration_s"]
    assert max(ends) - document["started_unix"] <= duration <= max(ends) - document["started_unix"] + 0.25
    assert f["total_input_tokens"] == 30 * 120 and f["total_output_tokens"] == 30 * 24
    assert f["request_throughput"] == pytest.approx(30 / duration)
    assert f["output_throughput"] == pytest.approx(30 * 24 / duration)
    assert f["total_token_throughput"] == pytest.approx(30 * (120 + 24) / duration)
    good = sum(1 for r, tpot in zip(done, tpots) if r["ttft_s"] <= 0.014 and tpot <= 0.0049)
    assert f["request_goodput"] == pytest.approx(good / duration)

    assert document["params"] == {
        "num_prompts": 30, "request_rate": 40.0, "burstiness": 1.0, "max_concurrency": None, "prompt_tokens": 120,
        "max_tokens": 24, "slo_ttft_ms": 14.0, "slo_tpot_ms": 4.9, "seed": 5, "chat": False,
    }
    runs = list((tmp_path / "runs").glob("*-bench-*.json"))
    assert len(runs) == 1
    run = json.loads(runs[0].read_text())
    assert run["kind"] == "bench" and run["params"] == document["params"]
    assert run["requests"] == requests and run["result"]["request_throughput"] == f["request_throughput"]
    assert run["server"]["simulator_flags"] is not None


def test_goodput_is_zero_under_an_impossible_slo_and_full_under_a_loose_one(sim, capsys):
    code, out, err = bench(capsys, "--url", sim.url, "--num-prompts", "8", "--prompt-tokens", "50", "--max-tokens", "8",
                           "--slo-tpot-ms", "0.001", "--json", "--no-save")
    assert code == 0, err
    assert json.loads(out)["figures"]["request_goodput"] == 0
    code, out, err = bench(capsys, "--url", sim.url, "--num-prompts", "8", "--prompt-tokens", "50", "--max-tokens", "8",
                           "--slo-ttft-ms", "60000", "--slo-tpot-ms", "60000", "--json", "--no-save")
    f = json.loads(out)["figures"]
    assert f["request_goodput"] == pytest.approx(f["request_throughput"])


def test_max_concurrency_caps_the_requests_in_flight(sim, capsys):
    code, out, err = bench(capsys, "--url", sim.url, "--num-prompts", "12", "--max-concurrency", "2", "--prompt-tokens", "50",
                           "--max-tokens", "32", "--json", "--no-save")
    assert code == 0, err
    document = json.loads(out)
    assert document["peak_in_flight"] == 2
    assert document["figures"]["peak_concurrent_requests"] <= 2


def test_the_table_is_vllms_result_block(sim, capsys):
    code, out, err = bench(capsys, "--url", sim.url, "--num-prompts", "4", "--request-rate", "20", "--prompt-tokens", "50",
                           "--max-tokens", "8", "--slo-ttft-ms", "1000", "--no-save")
    assert code == 0, err
    for line in ("Successful requests:", "Request rate configured (RPS):", "Request goodput (req/s):",
                 "Median TTFT (ms):", "P99 ITL (ms):", "Mean TPOT (ms):", "P90 E2EL (ms):"):
        assert line in out
    assert out.startswith("openai ")


def test_a_role_only_chat_chunk_is_not_the_first_token(capsys):
    scripted = ScriptedServer(Script(ttft_s=0.08, itl_s=0.005, role_chunk=True)).start()
    try:
        code, out, err = bench(capsys, "--url", scripted.url, "--num-prompts", "4", "--prompt-tokens", "20",
                               "--max-tokens", "8", "--chat", "--json", "--no-save")
    finally:
        scripted.stop()
    assert code == 0, err
    figures = json.loads(out)["figures"]
    # The role chunk is written at once, the first token 80 ms later: TTFT is the token's.
    assert figures["ttft_s"]["n"] == 4 and figures["ttft_s"]["p50"] >= 0.075
    client_gaps = sum(len(r["client_gaps"]) for r in json.loads(out)["requests"])  # a loaded box's meter, left out
    assert figures["itl_s"]["n"] == 4 * 7 - client_gaps


def test_server_dying_mid_run_keeps_what_finished(capsys, tmp_path):
    sim = SimulatorProcess.start()
    killer = threading.Timer(3.0, sim.stop)  # after the prompts are fitted, a few seconds into the 10 s of sends
    killer.start()
    try:
        code, out, err = bench(capsys, "--url", sim.url, "--num-prompts", "100", "--request-rate", "10",
                               "--prompt-tokens", "50", "--max-tokens", "16", "--json")
    finally:
        killer.cancel()
        sim.stop()
    assert code == 1
    document = json.loads(out)
    assert "the server went away" in document["error"]
    assert 3 <= document["figures"]["completed"] < 100
    assert err.strip().splitlines()[-1].startswith("phasetop bench: the server went away")
    assert "Traceback" not in err
    assert len(list((tmp_path / "runs").glob("*-bench-*.json"))) == 1  # what finished is saved


def test_connection_refused_is_one_line(capsys):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, out, err = bench(capsys, "--url", f"http://127.0.0.1:{port}", "--num-prompts", "3")
    assert code == 1 and out == ""
    assert len(err.strip().splitlines()) == 1 and "connection refused" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "ftp://x", "--num-prompts", "3"], "bad URL"),
        (["--url", "http://127.0.0.1:9", "--num-prompts", "0"], "--num-prompts"),
        (["--url", "http://127.0.0.1:9", "--num-prompts", "3", "--request-rate", "0"], "--request-rate"),
        (["--url", "http://127.0.0.1:9", "--num-prompts", "3", "--burstiness", "-1"], "--burstiness"),
        (["--url", "http://127.0.0.1:9", "--num-prompts", "3", "--max-concurrency", "0"], "--max-concurrency"),
        (["--url", "http://127.0.0.1:9", "--num-prompts", "3", "--slo-ttft-ms", "0"], "--slo-ttft-ms"),
    ],
)
def test_bad_input_is_a_usage_error(capsys, args, message):
    code, out, err = bench(capsys, *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err


def test_the_api_key_never_reaches_output_or_files(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PHASETOP_API_KEY", SECRET)
    saved = tmp_path / "bench.json"
    with SimulatorProcess.start(env={"VLLM_API_KEY": SECRET}) as sim:
        code, out, err = bench(capsys, "--url", sim.url, "--num-prompts", "3", "--prompt-tokens", "30", "--max-tokens", "4",
                               "--json", "--save", str(saved))
    assert code == 0, err
    files = [saved, *(tmp_path / "runs").glob("*.json")]
    assert len(files) == 2
    for text in (out, err, *(p.read_text() for p in files)):
        assert SECRET not in text


def test_ctrl_c_stops_sending_and_reports_what_finished(sim, tmp_path):
    """The first Ctrl-C lets the requests in flight finish; the figures and the saved run hold them."""
    env = {**os.environ, "PHASETOP_RUNS_DIR": str(tmp_path / "runs")}
    process = subprocess.Popen(
        [sys.executable, "-m", "tui", "bench", "--url", sim.url, "--num-prompts", "400", "--request-rate", "8",
         "--prompt-tokens", "50", "--max-tokens", "16", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    deadline = time.monotonic() + 60
    while "bench:" not in process.stderr.readline() and time.monotonic() < deadline:
        pass  # until the first progress line: the load is running
    time.sleep(1.0)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    document = json.loads(out)
    assert document["error"].startswith("interrupted")
    assert 1 <= document["figures"]["completed"] < 400
    assert "Traceback" not in err and "stopping; waiting for" in err
    assert err.strip().splitlines()[-1].startswith("phasetop bench: interrupted")
    assert len(list((tmp_path / "runs").glob("*-bench-*.json"))) == 1
