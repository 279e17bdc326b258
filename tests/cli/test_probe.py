"""`phasetop probe` against the scripted loopback server: JSON shape, the table, and every fault."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from testbeds.scripted_server import Script, ScriptedServer
from tests.cli.running import assert_one_clear_line
from tui.cli.main import main

REQUEST_KEYS = {
    "ok", "error", "prompt_tokens", "output_tokens", "connect_s", "ttft_s", "e2e_s", "tpot_s", "decode_tok_s",
    "prefill_tok_s", "itl_s", "t_sent_unix", "token_offsets_s", "server_split", "chunk_gaps_s", "tokens_per_chunk",
}
SUMMARY_KEYS = {"bursts_excluded", "ttft_s", "itl_s", "chunk_gaps_s", "tpot_s", "e2e_s", "decode_tok_s", "prefill_tok_s"}
SECRET = "sk-never-show-this-7f3a9c"


@pytest.fixture
def server(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # no user config file
    monkeypatch.delenv("PHASETOP_API_KEY", raising=False)
    monkeypatch.setenv("PHASETOP_RUNS_DIR", str(tmp_path / "runs"))  # saved runs stay in the test's dir
    scripted = ScriptedServer(Script(ttft_s=0.03, itl_s=0.005)).start()
    yield scripted
    scripted.stop()


def probe(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["probe", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("kind", ["openai", "ollama", "llamacpp"])
def test_json_shape_for_each_api(server, capsys, kind):
    server.script = Script(kind=kind, ttft_s=0.03, itl_s=0.005)
    code, out, err = probe(capsys, "--url", server.url, "--prompt-tokens", "50", "--max-tokens", "8", "--repeat", "2", "--json")
    assert code == 0, err
    assert err.startswith("saved run ") and err.count("\n") == 1  # the one stderr line: where the run went
    document = json.loads(out)
    assert document["server"]["kind"] == kind
    assert document["server"]["model"] == "scripted-model"
    assert len(document["requests"]) == 2
    for request in document["requests"]:
        assert REQUEST_KEYS <= request.keys()
        assert request["ok"] is True
        assert request["ttft_s"] >= 0.025
        # Every gap but those the client caused (a loaded box's meter reading late) is an ITL.
        assert len(request["itl_s"]) == len(request["token_offsets_s"]) - 1 - len(request["client_gaps"])
    assert set(document["summary"]) == SUMMARY_KEYS
    assert document["summary"]["ttft_s"]["n"] == 2 - document["summary"]["bursts_excluded"]
    split = document["requests"][0]["server_split"]
    assert (split is not None) == (kind != "openai")
    if kind == "openai":
        assert document["requests"][0]["prompt_tokens"] == 50  # exact via /tokenize, confirmed by usage


def test_readable_table_and_cold_first_request(server, capsys):
    server.script = Script(kind="ollama", ttft_s=0.02, itl_s=0.005, load_duration_ns=900_000_000)
    code, out, err = probe(capsys, "--url", server.url, "--repeat", "2", "--chat")
    assert code == 0, err
    assert "ollama" in out and "scripted-model" in out
    assert "TTFT ms" in out and "decode tok/s" in out and "ITL p99 ms" in out
    assert "(server)" in out
    assert "cold" in out.splitlines()[3]  # the first request row
    assert "cold" not in out.splitlines()[4]
    assert server.log[0].path == "/api/chat"


def test_prompt_text_is_sent_as_given(server, capsys):
    code, _, err = probe(capsys, "--url", server.url, "--prompt", "tell me a story", "--json")
    assert code == 0, err
    assert server.log[-1].body["prompt"] == "tell me a story"
    assert server.log[-1].body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    ("url", "code", "words"),
    [
        ("localhost:8000", 2, ["bad URL"]),
        ("ftp://127.0.0.1:21", 2, ["bad URL"]),
        ("http://phasetop-test.invalid:8000", 1, ["DNS"]),
    ],
)
def test_unreachable_or_bad_urls(capsys, monkeypatch, tmp_path, url, code, words):
    monkeypatch.chdir(tmp_path)
    exit_code, out, err = probe(capsys, "--url", url, "--json")
    assert exit_code == code
    assert out == ""
    assert_one_clear_line(exit_code, err, *words)


def test_connection_refused(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, out, err = probe(capsys, "--url", f"http://127.0.0.1:{_free_port()}", "--json")
    assert_one_clear_line(code, err, "refused")
    assert out == ""


def test_tls_to_a_plain_http_server(server, capsys):
    code, _, err = probe(capsys, "--url", server.url.replace("http://", "https://"), "--timeout", "5")
    assert_one_clear_line(code, err, "TLS")


@pytest.mark.parametrize("kind", ["openai", "llamacpp"])
def test_wrong_api_key_is_named_but_never_shown(server, capsys, monkeypatch, kind):
    server.script = Script(kind=kind, api_key="the-right-key")
    monkeypatch.setenv("PHASETOP_API_KEY", SECRET)
    code, out, err = probe(capsys, "--url", server.url, "--api", kind, "--model", "m", "--json")
    assert_one_clear_line(code, err, "401", "API key")
    assert SECRET not in out + err


def test_right_api_key_is_sent(server, capsys, monkeypatch):
    server.script = Script(api_key=SECRET)
    monkeypatch.setenv("PHASETOP_API_KEY", SECRET)
    code, out, err = probe(capsys, "--url", server.url, "--json")
    assert code == 0, err
    assert SECRET not in out + err


@pytest.mark.parametrize(
    ("script", "args", "words"),
    [
        (Script(fault="status", status=404, status_message="The model `nope` does not exist."), ["--model", "nope"], ["404", "nope"]),
        (Script(fault="status", status=500, status_message="CUDA out of memory"), [], ["500", "out of memory"]),
        (Script(fault="not_sse"), [], ["expected an SSE stream", "text/html"]),
        (Script(kind="ollama", fault="not_json"), [], ["not JSON"]),
        (Script(fault="malformed"), [], ["malformed chunk"]),
        (Script(fault="error_event"), [], ["engine died"]),
        (Script(fault="cut"), [], ["closed"]),
        (Script(kind="llamacpp", fault="cut"), [], ["closed"]),
        (Script(fault="silence", silence_s=3.0), ["--timeout", "0.4"], ["timeout"]),
    ],
    ids=["404-model", "500", "not-sse", "not-json", "malformed", "error-event", "cut", "cut-llamacpp", "silence"],
)
def test_faults_keep_the_finished_requests(server, capsys, script, args, words):
    script.ttft_s, script.itl_s, script.fault_from_request = 0.01, 0.005, 2
    server.script = script
    code, out, err = probe(capsys, "--url", server.url, "--repeat", "3", "--max-tokens", "8", "--json", *args)
    assert_one_clear_line(code, err, "request 2 of 3", *words)
    requests = json.loads(out)["requests"]
    assert [r["ok"] for r in requests] == [True, False]
    assert requests[1]["error"]
    if script.fault in ("malformed", "error_event", "cut", "silence"):
        assert len(requests[1]["token_offsets_s"]) == script.fault_after  # what arrived is kept
    summary = json.loads(out)["summary"]  # the failed request is in no figure (nor one a loaded box saw in a burst)
    assert summary["ttft_s"]["n"] == 1 - summary["bursts_excluded"]


def test_fault_without_json_prints_the_table_and_one_error_line(server, capsys):
    server.script = Script(fault="cut", fault_from_request=1, ttft_s=0.01)
    code, out, err = probe(capsys, "--url", server.url)
    assert_one_clear_line(code, err, "failed")
    assert "failed:" in out


def test_subprocess_failure_has_no_traceback_and_json_on_stdout(server, tmp_path):
    server.script = Script(fault="status", status=500, fault_from_request=2, ttft_s=0.01, itl_s=0.002)
    result = subprocess.run(
        [sys.executable, "-m", "tui", "probe", "--url", server.url, "--repeat", "2", "--json"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={"PATH": "", "XDG_CONFIG_HOME": str(tmp_path), "PHASETOP_API_KEY": SECRET, "PHASETOP_RUNS_DIR": str(tmp_path / "runs")},
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert [r["ok"] for r in json.loads(result.stdout)["requests"]] == [True, False]
    assert SECRET not in result.stdout + result.stderr


def test_subprocess_success(server, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tui", "probe", "--url", server.url, "--prompt-tokens", "20", "--max-tokens", "4"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={"PATH": "", "XDG_CONFIG_HOME": str(tmp_path), "PHASETOP_RUNS_DIR": str(tmp_path / "runs")},
    )
    assert result.returncode == 0, result.stderr
    assert "TTFT ms" in result.stdout


def test_cached_tokens_come_from_the_servers_counters_when_usage_has_none(capsys, tmp_path, monkeypatch):
    # The simulator, as vLLM, puts cached_tokens in usage only with --enable-prompt-tokens-details.
    from tui.sources.servers.simulator_server import SimulatorProcess

    monkeypatch.chdir(tmp_path)
    prompt = " ".join(["shared words of a long prompt"] * 60)
    with SimulatorProcess.start() as sim:
        code, out, _ = probe(capsys, "--url", sim.url, "--prompt", prompt, "--max-tokens", "4", "--repeat", "2", "--json", "--no-save")
        assert code == 0
        first, second = (r["server_split"] for r in json.loads(out)["requests"])
        assert first["cached_tokens"] == 0 and first["cached_from_metrics"]
        assert second["cached_tokens"] > 200 and second["cached_from_metrics"]  # the same prompt again: its blocks hit
        code, out, _ = probe(capsys, "--url", sim.url, "--prompt", prompt, "--max-tokens", "4", "--no-save")
        assert "* cached tokens: the growth of the server's cache-hit counter" in out
    with SimulatorProcess.start(["--enable-prompt-tokens-details"]) as sim:
        code, out, _ = probe(capsys, "--url", sim.url, "--prompt", prompt, "--max-tokens", "4", "--repeat", "2", "--json", "--no-save")
        second = json.loads(out)["requests"][1]["server_split"]
        assert second["cached_tokens"] > 200 and not second["cached_from_metrics"]  # usage's own count wins


def test_on_ollama_short_answers_are_said_since_it_cannot_ignore_eos(server, capsys):
    server.script = Script(kind="ollama")  # 8 tokens, then done: as a model that stops
    code, _, err = probe(capsys, "--url", server.url, "--max-tokens", "64", "--repeat", "2", "--json", "--no-save")
    assert code == 0
    assert "phasetop probe: 2 of 2 answers ended before 64 tokens (Ollama cannot be asked to ignore end-of-sequence)" in err
    server.script = Script(kind="openai")
    code, _, err = probe(capsys, "--url", server.url, "--max-tokens", "64", "--json", "--no-save")
    assert code == 0 and "ended before" not in err  # asked for exactly 64 (ignore_eos): not Ollama's limit
    assert server.log[-1].body["ignore_eos"] is True and server.log[-1].body["min_tokens"] == 64
