"""phasetop's figures on the real vLLM server, beside vLLM's own: exact lengths, the two phases, the
server's histograms, the measurement guard. Margins are for a loaded 2-core machine."""

from __future__ import annotations

import json
import re
import signal
import statistics
import subprocess
import sys
import time

import httpx
import pytest

from tests.real_vllm.conftest import CLIENT_TIMEOUT_S, phasetop_json
from tui.sources.servers.vllm_server import DEFAULT_MAX_MODEL_LEN

pytestmark = pytest.mark.real_vllm

MAX_TOKENS = 64


def probe(capsys, vllm, prompt_tokens: int, repeat: int, *extra: str) -> dict:
    code, document, err = phasetop_json(capsys, "probe", "--url", vllm.url, "--prompt-tokens", str(prompt_tokens),
                                        "--max-tokens", str(MAX_TOKENS), "--repeat", str(repeat),
                                        "--timeout", CLIENT_TIMEOUT_S, "--no-save", *extra)
    assert code == 0, err
    return document


def trusted(document: dict) -> list[dict]:
    return [r for r in document["requests"] if r["ok"] and not r["burst"] and not r["cold"]]


def test_prompts_are_exactly_n_tokens_and_ttft_grows_with_them_while_decode_stays(capsys, vllm):
    probe(capsys, vllm, 16, 1)  # the fresh server's first request pays warm-up: off the record
    # Short and long in turn, so whatever else loads the machine meanwhile weighs on both alike.
    rounds = [(probe(capsys, vllm, 200, 1), probe(capsys, vllm, 2000, 1)) for _ in range(5)]
    for pair in rounds:
        for document, n in zip(pair, (200, 2000)):
            [request] = document["requests"]
            # The server's usage: what it really read, and ignore_eos made every answer max_tokens long.
            assert request["prompt_tokens"] == n and not request["tokens_estimated"], request
            assert request["output_tokens"] == MAX_TOKENS
    short_ok = [r for pair in rounds for r in trusted(pair[0])]
    long_ok = [r for pair in rounds for r in trusted(pair[1])]
    assert len(short_ok) >= 2 and len(long_ok) >= 2, [d["requests"][0]["burst"] for pair in rounds for d in pair]
    ttft_short = statistics.median(r["ttft_s"] for r in short_ok)
    ttft_long = statistics.median(r["ttft_s"] for r in long_ok)
    assert ttft_long >= 2 * ttft_short, (ttft_short, ttft_long)
    # Decode by the server's own clock (free of the client's scheduling), as the median of each round's
    # long ÷ short, so a spell of load elsewhere lands on both sides of a ratio.
    ratios = [_server_decode(lg) / _server_decode(sh) for sh, lg in ((p[0]["requests"][0], p[1]["requests"][0]) for p in rounds)]
    assert abs(statistics.median(ratios) - 1) < 0.25, ratios


def test_client_and_server_decode_agree_and_ttft_splits_into_the_servers_parts(capsys, vllm):
    # A spell in which the meter could not read (the engine's busy polling had both cores) leaves a probe's every gap
    # the client's own, rightly untimed: up to three probes, until two requests were timed.
    documents = []
    while len(documents) < 3 and sum(len(trusted(d)) for d in documents) < 2:
        documents.append(probe(capsys, vllm, 200, 4))
    checked = 0
    for request in (r for document in documents for r in trusted(document)):
        both = request["reconcile"]
        # Same definition on both sides (tokens − 1 gaps, first → last): a ratio of 1 when they agree.
        assert 0.9 < both["decode_ratio"] < 1.1, both
        parts = both["ttft_parts"]
        assert both["ttft_gap_is"] == "network + queue"
        assert parts["queue_s"] is not None and parts["queue_s"] >= 0
        assert parts["network_s"] == pytest.approx(request["ttft_s"] - parts["queue_s"] - parts["prefill_first_step_s"])
        assert 0 <= parts["network_s"] < max(0.25, 0.5 * request["ttft_s"]), parts
        checked += 1
    assert checked >= 2, [(r["ok"], r["burst"], r["cold"]) for document in documents for r in document["requests"]]


def test_every_canonical_metric_field_is_read_from_real_vllm(capsys, vllm):
    probe(capsys, vllm, 200, 1)  # something in the histograms
    code, document, err = phasetop_json(capsys, "metrics", "--url", vllm.url, "--once", "--interval", "0.5")
    assert code == 0, err
    assert document["engine"] == "vllm"
    names = document["source_names"]
    for field in ("running", "waiting", "kv_cache_usage", "preemptions_total", "prompt_tokens_total",
                  "generation_tokens_total", "prefix_cache_hit_rate", "ttft_s", "itl_s", "e2e_s", "queue_s",
                  "prefill_s", "decode_s", "waiting_capacity", "waiting_deferred", "kv_cache_size_tokens"):
        assert names.get(field, "").startswith("vllm:"), (field, names.get(field))
        # Windowed rates are None in a window with no prompt; the lifetime hit rate stands for it.
        assert document.get(field if field != "prefix_cache_hit_rate" else "prefix_cache_hit_rate_total") is not None, field
    assert document["generation_tokens_total"] >= MAX_TOKENS
    assert document["kv_cache_size_tokens"] > 0
    assert document["engine_config"]["block_size"]


def test_bench_ttft_mean_matches_the_servers_own_histogram_over_the_same_window(capsys, vllm):
    before = _ttft_histogram(vllm.url)
    code, document, err = phasetop_json(capsys, "bench", "--url", vllm.url, "--num-prompts", "12", "--request-rate", "4",
                                        "--max-concurrency", "2", "--prompt-tokens", "200", "--max-tokens", "32",
                                        "--timeout", CLIENT_TIMEOUT_S, "--no-save")
    assert code == 0, err
    after = _ttft_histogram(vllm.url)
    count, total = after[0] - before[0], after[1] - before[1]
    assert count == 12
    server_mean = total / count
    client_mean = document["figures"]["ttft_s"]["mean"]
    assert client_mean == pytest.approx(server_mean, rel=0.20), (client_mean, server_mean)
    assert all(r["prompt_tokens"] == 200 and r["output_tokens"] == 32 for r in document["requests"])


def test_a_client_paused_mid_stream_has_its_pause_named_its_own_and_left_out_of_itl(vllm):
    client = subprocess.Popen(
        # 384 tokens (3–4 s): on a loaded box a 128-token answer once ended before a /metrics poll saw it running.
        [sys.executable, "-m", "tui", "probe", "--url", vllm.url, "--prompt-tokens", "200", "--max-tokens", "384",
         "--timeout", CLIENT_TIMEOUT_S, "--json", "--no-save"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while _running(vllm.url) < 1:
            assert time.monotonic() < deadline and client.poll() is None, "the probe never reached the server"
            time.sleep(0.01)
        time.sleep(0.15)  # a few tokens read as they come, then the client stops reading for a second
        client.send_signal(signal.SIGSTOP)
        time.sleep(1.0)
        client.send_signal(signal.SIGCONT)
        out, err = client.communicate(timeout=120)
    finally:
        client.kill()
    assert client.returncode == 0, err
    document = json.loads(out)
    [request] = document["requests"]
    offsets = request["token_offsets_s"]
    paused = max(range(len(offsets) - 1), key=lambda i: offsets[i + 1] - offsets[i])
    assert offsets[paused + 1] - offsets[paused] > 0.5, "the pause itself, as the client read it"
    # The meter saw its own loop stop: the pause (and the reads piled up behind it) are its own, not vLLM's.
    assert paused in request["client_gaps"], request["client_gaps"]
    assert max(request["itl_s"]) < 0.5 and len(request["itl_s"]) == len(offsets) - 1 - len(request["client_gaps"])
    if not request["burst"]:  # unless its last chunk was read in the pause, its other figures stand
        assert document["summary"]["itl_s"]["n"] == len(request["itl_s"]) and document["summary"]["itl_s"]["p99"] < 0.5


def test_every_sweep_runs_to_the_end_with_default_values_on_a_4096_token_server(capsys, vllm):
    for vary in ("prompt-tokens", "prefix", "concurrency", "interference", "context"):
        code, document, err = phasetop_json(capsys, "sweep", "--url", vllm.url, "--vary", vary,
                                            "--timeout", CLIENT_TIMEOUT_S, "--no-save")
        assert code == 0, (vary, err)
        assert document["rows"] and document["finding"], vary
    assert DEFAULT_MAX_MODEL_LEN == 4096


def _server_decode(request: dict) -> float:
    return request["reconcile"]["server_decode_tok_s"]


def _ttft_histogram(url: str) -> tuple[float, float]:
    text = httpx.get(f"{url}/metrics").text
    count = _sample(text, "vllm:time_to_first_token_seconds_count")
    total = _sample(text, "vllm:time_to_first_token_seconds_sum")
    return count, total


def _running(url: str) -> float:
    return _sample(httpx.get(f"{url}/metrics").text, "vllm:num_requests_running")


def _sample(text: str, name: str) -> float:
    """The sum of a family's samples over its label sets (one engine here)."""
    return sum(float(m.group(1)) for m in re.finditer(rf"^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.e+-]+)$", text, re.M))
