"""The run store: atomic saves that survive SIGKILL, lookup by id / prefix / path, and secrets redacted from what is saved."""

from __future__ import annotations

import hashlib
import json
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tui.core.runs.run_record import new_run
from tui.core.untrusted import register_secret, register_url_credentials
from tui.runs_store import RunFileError, RunNotFound, list_runs, load_run, save_run

REQUEST = {"ok": True, "ttft_s": 0.05, "itl_s": [0.005, 0.006], "tpot_s": 0.0055, "e2e_s": 0.061,
           "decode_tok_s": 180.0, "prefill_tok_s": 4000.0, "token_offsets_s": [0.05, 0.055, 0.061]}


def make_run(kind: str = "probe", started: datetime | None = None, **result) -> dict:
    started = started or datetime.now(UTC)
    server = {"url": "http://127.0.0.1:8000", "kind": "openai", "model": "m", "version": "0.33.0"}
    return new_run(kind, {"max_tokens": 3}, server, [REQUEST], result, started, started)


def test_round_trip_is_exact(tmp_path):
    run = make_run(rate=float("inf"), nested={"a": [1, 2.5, None]})
    path = save_run(run, tmp_path / "new" / "dir")
    assert path == tmp_path / "new" / "dir" / f"{run['id']}.json"
    loaded = load_run(run["id"], tmp_path / "new" / "dir")
    assert loaded == {**run, "result": {**run["result"], "rate": "inf"}}  # JSON has no inf: kept as text
    json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}"))


def test_list_is_oldest_first_with_headers_and_skips_what_is_not_a_run(tmp_path):
    older = make_run(started=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    newer = make_run("bench", started=datetime(2026, 1, 2, 3, 4, 6, tzinfo=UTC))
    save_run(newer, tmp_path)
    save_run(older, tmp_path)
    (tmp_path / "notes.json").write_text("{not json")
    (tmp_path / "other.json").write_text(json.dumps({"schema": 99, "id": "x"}))
    (tmp_path / f".{older['id']}.json").write_text("hidden")
    headers = list_runs(tmp_path)
    assert [h["id"] for h in headers] == [older["id"], newer["id"]]
    assert headers[0]["id"].startswith("20260102-030405-probe-")
    assert headers[1]["kind"] == "bench"
    assert headers[0]["started"] == "2026-01-02T03:04:05.000Z"
    assert headers[0]["server"] == {"url": "http://127.0.0.1:8000", "kind": "openai", "model": "m", "version": "0.33.0"}
    assert headers[0]["summary"] == "1 request, TTFT p50 50.0 ms, ITL p50 5.50 ms, decode 180.0 tok/s"
    assert headers[0]["path"] == str(tmp_path / f"{older['id']}.json")
    assert list_runs(tmp_path / "missing") == []


def test_load_by_id_prefix_and_path(tmp_path):
    first = make_run(started=datetime(2026, 5, 1, 10, 0, 0, tzinfo=UTC))
    second = make_run(started=datetime(2026, 5, 1, 11, 0, 0, tzinfo=UTC))
    path = save_run(first, tmp_path)
    save_run(second, tmp_path)
    assert load_run(first["id"], tmp_path)["id"] == first["id"]
    assert load_run("20260501-10", tmp_path)["id"] == first["id"]
    assert load_run(str(path), tmp_path / "elsewhere")["id"] == first["id"]
    with pytest.raises(RunNotFound, match="matches 2 runs"):
        load_run("20260501", tmp_path)
    with pytest.raises(RunNotFound, match="no run '2099' in"):
        load_run("2099", tmp_path)
    with pytest.raises(RunNotFound, match="no run file"):
        load_run(str(tmp_path / "gone.json"), tmp_path)
    (tmp_path / "broken.json").write_text('{"schema": 1, "id": ')
    with pytest.raises(RunFileError, match="cannot read run file"):
        load_run("broken", tmp_path)


def test_a_run_holding_a_registered_secret_is_saved_redacted(tmp_path):
    """The key a server echoed, and the URL's credentials, are saved as *** (the run is kept, not refused)."""
    key = "sk-secret-123-run-file"
    register_secret(key)  # as making settings does
    register_url_credentials("http://alice:pa55word@127.0.0.1:8000/v1")
    run = make_run(echoed=f"HTTP 500: invalid credentials: Bearer {key}", quoted={"a\"b": f'"{key}"'})
    run["server"] = {**run["server"], "url": "http://alice:pa55word@127.0.0.1:8000/v1", "model": f"m-{key}"}
    run["requests"] = [{**run["requests"][0], "error": key}]
    path = save_run(run, tmp_path)
    text = path.read_text()
    for trace in (key, key[3:17], "pa55word", "alice"):
        assert trace not in text, f"{trace!r} saved in the run file"
    saved = load_run(run["id"], tmp_path)
    assert saved["server"]["url"] == "http://127.0.0.1:8000/v1"
    assert saved["result"]["echoed"] == "HTTP 500: invalid credentials: Bearer ***"
    assert saved["server"]["model"] == "m-***" and saved["requests"][0]["error"] == "***"
    assert saved["requests"][0]["ttft_s"] == run["requests"][0]["ttft_s"]  # the figures are untouched


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="run kind"):
        make_run("benchmark")


SAVER = """
import hashlib, sys
from pathlib import Path
from tui.runs_store import load_run, save_run
directory, run_id = Path(sys.argv[1]), sys.argv[2]
run = load_run(run_id, directory)
print("ready", flush=True)
while True:
    generation = run["result"]["generation"] + 1
    payload = str(generation % 10) * 3_000_000
    run["result"] = {"generation": generation, "payload": payload, "sha256": hashlib.sha256(payload.encode()).hexdigest()}
    save_run(run, directory)
"""


def test_sigkill_during_saves_never_leaves_a_torn_run(tmp_path):
    """A child saves a 3 MB run over and over; killed at random moments, the file is always one whole version."""
    run = make_run(generation=0, payload="", sha256=hashlib.sha256(b"").hexdigest())
    save_run(run, tmp_path)
    rng = random.Random(6)
    seen_generation = 0
    killed_inside_a_save = 0
    for _ in range(16):  # each a fresh interpreter: 16 kills land inside saves often enough (the asserts below say so)
        child = subprocess.Popen([sys.executable, "-c", SAVER, str(tmp_path), run["id"]], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.0, 0.25))
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        killed_inside_a_save += any(p.name.endswith(".tmp") for p in tmp_path.iterdir())
        headers = list_runs(tmp_path)
        assert [h["id"] for h in headers] == [run["id"]]  # temp files never show as runs
        leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
        assert leftovers == [], f"the killed save's temp files outlived the listing: {leftovers}"
        result = load_run(run["id"], tmp_path)["result"]
        assert hashlib.sha256(result["payload"].encode()).hexdigest() == result["sha256"]
        assert result["generation"] >= seen_generation  # the old version intact or a newer one whole
        seen_generation = result["generation"]
    assert seen_generation > 5, "the child never got a save done: the test proves nothing"
    assert killed_inside_a_save, "no kill landed inside a save: the test proves nothing"
    assert sorted(p.name for p in Path(tmp_path).glob("*.json")) == [f"{run['id']}.json"]
