"""A server killed mid-answer: probe says so in one line, and keeps the requests that finished."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest

pytestmark = pytest.mark.real_engine

MAX_TOKENS = 40


def second_answer_under_way(url: str, timeout_s: float = 120) -> None:
    """Wait until a later task than the first seen is decoding: the request before it has finished."""
    deadline = time.monotonic() + timeout_s
    first_task = None
    while time.monotonic() < deadline:
        for slot in httpx.get(f"{url}/slots", timeout=10).json():
            if not slot["is_processing"]:
                continue
            first_task = slot["id_task"] if first_task is None else first_task
            decoded = slot["next_token"][0]["n_decoded"]
            if slot["id_task"] != first_task and 3 <= decoded < MAX_TOKENS - 5:
                return
        time.sleep(0.05)
    raise AssertionError(f"the second request did not start decoding within {timeout_s:.0f} s")


def test_killing_the_server_mid_answer_is_one_clear_line_and_keeps_what_finished(llama, tmp_path):
    command = [sys.executable, "-m", "tui", "probe", "--url", llama.url, "--json", "--no-save", "--timeout", "120",
               "--prompt-tokens", "40", "--max-tokens", str(MAX_TOKENS), "--repeat", "3"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path) as probe:
        try:
            second_answer_under_way(llama.url)
        finally:
            llama.kill()
        out, err = probe.communicate(timeout=120)
    assert probe.returncode == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    *finished, cut = json.loads(out)["requests"]  # request 2, or 3 if 2 ended early (end of text)
    assert lines[0].startswith(f"phasetop probe: request {len(finished) + 1} of 3 failed:"), lines[0]
    assert finished and all(r["ok"] and r["output_tokens"] > 1 and r["server_split"] for r in finished)
    assert not cut["ok"] and cut["error"]
    assert 0 < len(cut["token_offsets_s"]) < MAX_TOKENS, "the tokens that arrived before the cut are kept"
