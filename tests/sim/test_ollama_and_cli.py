"""`--api ollama` on the wire, and `phasetop sim` as a command: errors in one line, the ready document."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import httpx
import pytest


async def test_ollama_generate_streams_ndjson_with_counters_in_nanoseconds(start_sim):
    sim = start_sim("--api", "ollama")
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as client:
        response = await client.post("/api/generate", json={"model": "llama3.1:8b", "prompt": "Why is the sky blue?",
                                                              "options": {"num_predict": 6}})
        tags = (await client.get("/api/tags")).json()
        ps = (await client.get("/api/ps")).json()
        version = (await client.get("/api/version")).json()
        root = await client.get("/")
    assert response.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert [line["done"] for line in lines] == [False] * 6 + [True]
    final = lines[-1]
    assert final["eval_count"] == 6 and final["done_reason"] == "length"
    assert final["prompt_eval_count"] == 6  # "Why is the sky blue?": five words and a mark
    assert final["eval_duration"] > 5 * 4_000_000  # five decode steps of ~4.8 ms, in ns
    assert final["total_duration"] >= final["prompt_eval_duration"] + final["eval_duration"]
    assert tags["models"][0]["name"] == "llama3.1:8b"
    assert ps["models"][0]["context_length"] == 131072
    assert version["version"] and root.text == "Ollama is running"


async def test_ollama_chat_unknown_model_and_non_streamed(start_sim):
    sim = start_sim("--api", "ollama")
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as client:
        missing = await client.post("/api/chat", json={"model": "nope", "messages": [{"role": "user", "content": "hi"}]})
        whole = (await client.post("/api/chat", json={"messages": [{"role": "user", "content": "hi"}], "stream": False,
                                                      "options": {"num_predict": 4}})).json()
    assert missing.status_code == 404 and missing.json() == {"error": "model 'nope' not found"}
    assert whole["done"] is True and whole["eval_count"] == 4
    assert whole["message"]["role"] == "assistant" and len(whole["message"]["content"].split()) == 4


def phasetop(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui", *args], capture_output=True, text=True, timeout=timeout)


def test_unknown_gpu_is_one_line_and_exit_2():
    result = phasetop("sim", "--gpu", "voodoo5", "--port", "0")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "unknown device 'voodoo5'" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_weights_that_do_not_fit_say_so():
    result = phasetop("sim", "--gpu", "4090", "--model", "llama-3.1-70b", "--port", "0")
    assert result.returncode == 2 and "do not fit" in result.stderr and "Traceback" not in result.stderr


def test_small_card_caps_max_model_len_and_prints_one_json_document():
    process = subprocess.Popen([sys.executable, "-m", "tui", "sim", "--gpu", "4090", "--port", "0", "--json",
                                "--stop-on-stdin-close"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        lines = [process.stdout.readline()]
        while lines[-1] not in ("}\n", ""):  # the one document, printed when the server is ready
            lines.append(process.stdout.readline())
        document = json.loads("".join(lines))
        assert document["url"].startswith("http://127.0.0.1:")
        assert document["gpu"] == "NVIDIA RTX 4090"
        # (0.9 × 24 GB − 16 GB) / (128 KiB × 16) = 2670 blocks = 42720 tokens
        assert document["num_gpu_blocks"] == 2670 and document["max_model_len"] == "42720"
    finally:
        process.stdin.close()  # the child stops when its stdin closes
        process.wait(timeout=10)
    assert "capped" in process.stderr.read()


@pytest.mark.parametrize("layout", [(), ("--disaggregated",)], ids=["one server", "disaggregated"])
def test_ctrl_c_stops_the_simulator_with_exit_0(layout):
    """Ctrl-C is how a server command is stopped: it exits 0 with one line, not 130 (uvicorn hands the signal back
    once it has shut down)."""
    process = subprocess.Popen([sys.executable, "-m", "tui", "sim", "--port", "0", *layout], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        while not process.stdout.readline().startswith("phasetop-sim listening on"):
            assert process.poll() is None, process.stderr.read()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0
    finally:
        process.kill()
    stderr = process.stderr.read()
    assert "phasetop sim: stopped" in stderr and "Traceback" not in stderr and "interrupted" not in stderr
