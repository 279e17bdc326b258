"""`phasetop bench` and `phasetop sweep` on llama-server: one client for the whole run, every request ok.

llama-server closes the connection after every streamed answer although it advertises keep-alive;
a client that sends its next request on that pooled connection before the close reaches it used to
fail ("Server disconnected without sending a response") about one time in ten. Both commands reuse
one client for many requests, so every request of a run must come back ok.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.real.conftest import CLIENT_TIMEOUT_S, phasetop_json

pytestmark = pytest.mark.real_engine

BENCH_PROMPTS = 12
BENCH_PROMPT_TOKENS = 40
BENCH_MAX_TOKENS = 8
SWEEP_VALUES = (100, 400)
SWEEP_MAX_TOKENS = 16


def saved_run(tmp_path: Path, kind: str) -> dict:
    """The one run of `kind` the command saved into the test's runs dir (conftest points PHASETOP_RUNS_DIR there)."""
    [path] = (tmp_path / "runs").glob(f"*-{kind}-*.json")
    return json.loads(path.read_text())


def test_bench_at_concurrency_two_finishes_every_request(llama, capsys, tmp_path):
    code, document, err = phasetop_json(
        capsys, "bench", "--url", llama.url, "--timeout", CLIENT_TIMEOUT_S, "--num-prompts", str(BENCH_PROMPTS),
        "--request-rate", "inf", "--max-concurrency", "2",
        "--prompt-tokens", str(BENCH_PROMPT_TOKENS), "--max-tokens", str(BENCH_MAX_TOKENS),
    )
    requests = document["requests"]
    assert code == 0, err
    assert document["error"] is None
    assert [r["error"] for r in requests if not r["ok"]] == []
    assert len(requests) == BENCH_PROMPTS
    figures = document["figures"]
    assert figures["completed"] == BENCH_PROMPTS and figures["failed"] == 0
    # The server's own counts. Each request swaps the template's nonce for a fresh one of as many digits,
    # so every prompt is the N tokens /tokenize fitted (hex nonces gave 35-42 of 40); a base model may
    # end an answer early.
    assert all(r["prompt_tokens"] == BENCH_PROMPT_TOKENS for r in requests)
    assert not any(r["tokens_estimated"] for r in requests)
    assert all(1 <= r["output_tokens"] <= BENCH_MAX_TOKENS for r in requests)
    assert figures["total_input_tokens"] == sum(r["prompt_tokens"] for r in requests)
    assert 1 <= document["peak_in_flight"] <= 2
    assert 1 <= figures["peak_concurrent_requests"] <= 2
    ttft, e2el = figures["ttft_s"], figures["e2el_s"]
    assert 0 < ttft["p50"] <= e2el["p50"] < figures["duration_s"]
    assert 0 < figures["itl_s"]["p50"] < e2el["p50"]
    assert figures["output_throughput"] > 0
    assert saved_run(tmp_path, "bench")["result"]["completed"] == BENCH_PROMPTS


def test_sweep_of_prompt_length_keeps_every_request_and_ttft_climbs(llama, capsys, tmp_path):
    code, document, err = phasetop_json(
        capsys, "sweep", "--url", llama.url, "--timeout", CLIENT_TIMEOUT_S, "--vary", "prompt-tokens",
        "--values", ",".join(map(str, SWEEP_VALUES)), "--max-tokens", str(SWEEP_MAX_TOKENS),
    )
    assert code == 0, err
    rows = document["rows"]
    assert [row["prompt_tokens"] for row in rows] == list(SWEEP_VALUES)
    assert all(row["n"] == 3 for row in rows), rows  # three repeats each, none failed
    assert all(row["decode_tok_s"] > 0 and row["itl_p50_s"] > 0 for row in rows), rows
    # 4× the prompt: measured ~3-4× the TTFT on one core; medians of three keep a burst elsewhere out.
    assert rows[1]["ttft_s"] > 1.5 * rows[0]["ttft_s"], rows
    requests = saved_run(tmp_path, "sweep")["requests"]
    assert len(requests) == 2 * 3
    assert all(r["ok"] for r in requests), [r["error"] for r in requests]
    # /tokenize between streams rides the same client: a failed count would leave a guessed length.
    assert [r["prompt_tokens"] for r in requests] == [v for v in SWEEP_VALUES for _ in range(3)]
    assert not any(r["tokens_estimated"] for r in requests)
