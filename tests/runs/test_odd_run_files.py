"""Odd run files: each is named with its reason and skipped, never an internal error; the rest still list and compare.

Also what a runs dir can hold besides runs: temp files of a killed save (removed at once), two files with one
id (both listed), a runs dir that is a file (exit 2), and a `bench --save` document (compare reads it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tui.cli.main import main
from tui.core.runs.run_record import compare_runs, new_run
from tui.runs_store import RunFileError, RunStoreError, load_run, save_run, scan_runs
from tui.sources.servers.simulator_server import SimulatorProcess

T0 = datetime(2026, 4, 1, 9, 0, 0, tzinfo=UTC)
REQUEST = {"ok": True, "ttft_s": 0.05, "itl_s": [0.005, 0.006], "tpot_s": 0.0055, "e2e_s": 0.061,
           "decode_tok_s": 180.0, "prefill_tok_s": 4000.0}

ODD = [
    ({"requests": [1]}, "requests[0] is an int where an object was expected"),
    ({"requests": "three"}, "requests is a string where a list was expected"),
    ({"server": "http://h"}, "server is a string where an object was expected"),
    ({"requests": [{**REQUEST, "itl_s": 5}]}, "requests[0].itl_s is an int where a list was expected"),
    ({"requests": [{**REQUEST, "ttft_s": "x"}]}, "requests[0].ttft_s is a string where a number was expected"),
    ({"requests": [{**REQUEST, "ok": "yes"}]}, "requests[0].ok is a string where true or false was expected"),
    ({"result": [1, 2]}, "result is a list where an object was expected"),
    ({"params": [1]}, "params is a list where an object was expected"),
    ({"server": {"engine_config": ["block_size"]}}, "server.engine_config is a list where an object was expected"),
    ({"requests": [{**REQUEST, "ttft_s": 1e308}]},
     "requests[0].ttft_s is 1e+308 where a finite figure (at most 1e+15 in magnitude) was expected"),
    ({"requests": [{**REQUEST, "itl_s": [0.005, -1e308]}]},
     "requests[0].itl_s[1] is -1e+308 where a finite figure (at most 1e+15 in magnitude) was expected"),
    ({"result": {"request_throughput": 1e308}},
     "result.request_throughput is 1e+308 where a finite figure (at most 1e+15 in magnitude) was expected"),
    ({"id": 7}, "id is an int where a run id (a string) was expected"),
    ({"schema": 2}, "not a phasetop run file (schema 1): schema is 2"),
]


@pytest.fixture
def runs_dir(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no stray .env; paths in notes are relative
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("PHASETOP_API_KEY", raising=False)
    monkeypatch.delenv("PHASETOP_RUNS_DIR", raising=False)
    directory = tmp_path / "runs"
    directory.mkdir()
    return directory


def phasetop(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def good_run(started: datetime = T0, **params) -> dict:
    server = {"url": "http://127.0.0.1:8000", "kind": "openai", "model": "m", "version": "0.33.0"}
    return new_run("bench", {"max_tokens": 3, **params}, server, [REQUEST], {}, started, started)


def odd_file(directory: Path, name: str, change: dict) -> Path:
    path = directory / f"{name}.json"
    path.write_text(json.dumps({**good_run(), "id": name, **change}))
    return path


@pytest.mark.parametrize(("change", "reason"), ODD, ids=[reason.split(" where")[0] for _, reason in ODD])
def test_an_odd_file_is_named_with_its_reason_and_the_others_still_list(runs_dir, capsys, change, reason):
    good = good_run()
    save_run(good, runs_dir)
    odd_file(runs_dir, "odd", change)

    listing = scan_runs(runs_dir)
    assert [h["id"] for h in listing.headers] == [good["id"]]
    assert [(Path(e.path).name, e.reason) for e in listing.skipped] == [("odd.json", reason)]
    with pytest.raises(RunFileError, match=r"cannot read run file .*odd\.json: "):
        load_run("odd", runs_dir)

    code, out, err = phasetop(capsys, "runs", "--runs-dir", "runs")
    assert code == 0, err
    assert err == f"skipped runs/odd.json: {reason}\n"
    assert good["id"] in out and "1 request, TTFT p50 50.0 ms" in out

    code, out, err = phasetop(capsys, "runs", "--json", "--runs-dir", "runs")
    assert code == 0 and [h["id"] for h in json.loads(out)] == [good["id"]]  # stdout stays the one document
    assert err == f"skipped runs/odd.json: {reason}\n"

    code, out, err = phasetop(capsys, "compare", "odd", good["id"], "--runs-dir", "runs")
    assert (code, out) == (2, "")
    assert err == f"phasetop compare: cannot read run file runs/odd.json: {reason}\n"


def test_not_json_and_nested_too_deep_are_reasons_too(runs_dir, capsys):
    (runs_dir / "torn.json").write_text('{"schema": 1, "id": ')
    (runs_dir / "deep.json").write_text('{"schema": 1, "id": "deep", "params": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}")
    (runs_dir / "wide.json").write_text(json.dumps({**good_run(), "id": "wide", "params": {"x": [[[[]]]] * 10}}))
    listing = scan_runs(runs_dir)
    assert [h["id"] for h in listing.headers] == ["wide"]
    reasons = {Path(e.path).name: e.reason for e in listing.skipped}
    assert reasons["torn.json"].startswith("not JSON (")
    assert reasons["deep.json"].startswith("not JSON a reader can walk") or "levels deep" in reasons["deep.json"]
    code, _, err = phasetop(capsys, "runs", "--runs-dir", "runs")
    assert code == 0 and err.count("\n") == 2 and "Traceback" not in err


def test_two_files_with_one_id_are_both_listed_and_the_later_named(runs_dir, capsys):
    run = good_run()
    save_run(run, runs_dir)
    (runs_dir / "copy.json").write_text((runs_dir / f"{run['id']}.json").read_text())
    listing = scan_runs(runs_dir)
    assert [Path(h["path"]).name for h in listing.headers] == [f"{run['id']}.json", "copy.json"]
    code, out, err = phasetop(capsys, "runs", "--runs-dir", "runs")
    assert code == 0 and out.count(run["id"]) == 2
    assert err == f"runs/copy.json holds the id of runs/{run['id']}.json ({run['id']}): both listed; give compare a path to pick one\n"
    code, _, err = phasetop(capsys, "compare", "runs/copy.json", run["id"], "--runs-dir", "runs")
    assert code == 0, err


def test_a_runs_dir_that_is_a_file_is_a_usage_error(runs_dir, tmp_path, capsys):
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    code, out, err = phasetop(capsys, "runs", "--runs-dir", str(passwd))
    assert (code, out, err) == (2, "", f"phasetop runs: {passwd} is not a directory\n")
    code, out, err = phasetop(capsys, "compare", "a", "b", "--runs-dir", str(passwd))
    assert (code, out) == (2, "") and err.startswith(f"phasetop compare: {passwd} is not a directory")
    code, out, _ = phasetop(capsys, "runs", "--runs-dir", str(tmp_path / "not-yet"))
    assert code == 0 and out == f"no saved runs in {tmp_path / 'not-yet'}\n"  # a dir not made yet holds no runs


def test_temp_files_of_a_killed_save_go_at_the_next_listing(runs_dir):
    """A temp whose writer is gone is removed at once (not 600 s later); a live writer's temp is left alone."""
    save_run(good_run(), runs_dir)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    dead_pid = int(gone.stdout)
    dead = runs_dir / f".20260401-090000-bench-abcd.{dead_pid}.k3j2_x9q.tmp"
    live = runs_dir / f".20260401-090000-bench-abcd.{os.getpid()}.a8d9f0zz.tmp"
    for temp in (dead, live):
        temp.write_text('{"schema": 1, "id"')
    listing = scan_runs(runs_dir)
    assert listing.skipped == [] and len(listing.headers) == 1
    assert not dead.exists() and live.exists()


def test_compare_reads_a_file_bench_save_wrote(runs_dir, tmp_path, capsys):
    with SimulatorProcess.start([]) as sim:
        code, _, err = phasetop(capsys, "bench", "--url", sim.url, "--num-prompts", "3", "--request-rate", "inf",
                                "--prompt-tokens", "50", "--max-tokens", "4", "--runs-dir", "runs", "--save", "b.json")
    assert code == 0, err
    run_id = err.split("saved run ")[1].split()[0]
    code, out, err = phasetop(capsys, "compare", "b.json", run_id, "--runs-dir", "runs", "--json")
    assert code == 0, err
    comparison = json.loads(out)
    assert comparison["before"]["id"] == "b" and comparison["before"]["kind"] == "bench"
    assert comparison["params_diff"] == []  # the same bench, two files (the document holds no server config)
    throughput = next(f for f in comparison["figures"] if f["figure"] == "output_throughput")
    assert throughput["before"] == throughput["after"] > 0
    assert comparison["before"]["started"][:10] == comparison["after"]["started"][:10]  # from the document's started_unix


def test_a_random_seed_is_not_a_workload_change(runs_dir, capsys):
    before, after = good_run(seed=1234), good_run(datetime(2026, 4, 1, 9, 5, tzinfo=UTC), seed=98765)
    comparison = compare_runs(before, after)
    assert comparison["params_diff"] == []
    assert comparison["schedule_diff"] == [{"key": "seed", "before": "1234", "after": "98765", "source": "params"}]
    for run in (before, after):
        save_run(run, runs_dir)
    code, out, err = phasetop(capsys, "compare", before["id"], after["id"], "--runs-dir", "runs")
    assert code == 0, err
    assert "workload changed" not in out
    assert "arrival schedule: seed 1234 → 98765 (the same workload, arriving at other moments)" in out
    changed = compare_runs(before, good_run(seed=1, max_tokens=9))
    assert changed["params_diff"] == [{"key": "max_tokens", "before": "3", "after": "9", "source": "params"}]


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.text(max_size=8),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e308, -1e308, 1e15, 5e-324, "inf", "nan"]),
)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
                    max_leaves=20)
REQUEST_KEYS = ["ok", "burst", "ttft_s", "tpot_s", "e2e_s", "decode_tok_s", "prefill_tok_s", "itl_s"]
REQUESTS = st.lists(st.one_of(JSON, st.dictionaries(st.sampled_from(REQUEST_KEYS), JSON, max_size=8)), max_size=3)
SERVER = st.one_of(JSON, st.dictionaries(st.sampled_from(["url", "model", "kind", "simulator_flags", "engine_config",
                                                          "command_flags", "process_start_time"]), JSON, max_size=6))
RUN_SHAPED = st.fixed_dictionaries(
    {"schema": st.sampled_from([1, 1, 1, 1.0, True, "1"]), "id": st.one_of(st.text(min_size=1, max_size=8), JSON)},
    optional={"kind": st.one_of(st.sampled_from(["bench", "probe"]), JSON), "started": JSON, "params": JSON,
              "server": SERVER, "requests": st.one_of(REQUESTS, JSON), "result": JSON, "requests_sample": JSON},
)
BENCH_SHAPED = st.fixed_dictionaries({"server": SERVER, "params": JSON, "figures": JSON, "requests": st.one_of(REQUESTS, JSON)},
                                     optional={"started_unix": JSON})
DOCUMENTS = st.one_of(JSON, RUN_SHAPED, BENCH_SHAPED)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(first=DOCUMENTS, second=DOCUMENTS)
def test_any_json_in_a_run_file_is_a_run_or_a_reason_never_a_crash(runs_dir, capsys, first, second):
    for name, document in (("first", first), ("second", second)):
        (runs_dir / f"{name}.json").write_text(json.dumps(document))  # NaN and Infinity as Python writes them
    listing = scan_runs(runs_dir)
    assert len(listing.headers) + len(listing.skipped) == 2
    assert all(isinstance(e, RunFileError) and e.reason and "\n" not in e.reason for e in listing.skipped)
    for name in ("first", "second"):
        try:
            load_run(name, runs_dir)
        except RunStoreError:
            pass
    for args in (("runs",), ("runs", "--json"), ("compare", "first", "second"), ("compare", "second", "first", "--json")):
        code, out, err = phasetop(capsys, *args, "--runs-dir", "runs")
        assert code in (0, 2), f"phasetop {' '.join(args)} exited {code}: {err.strip()}"
        if "--json" in args and code == 0:
            json.loads(out, parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}"))
        assert "Traceback" not in err and (code == 0 or err.count("\n") == 1)
