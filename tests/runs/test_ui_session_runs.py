"""UI sessions among the saved runs: `runs` names them (and sweeps by their experiment), and `compare` treats what a
session sent as its workload: against a probe it is another kind, refused as bench against probe is; two sessions
that sent other presets are refused unless --force and then warned of; the same sends compare as they are."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tui.cli.main import main
from tui.core.measure.records import RequestTiming
from tui.core.measure.sends import Send
from tui.core.runs.run_record import new_run
from tui.core.runs.sessions import SESSION_SOURCE, Session, session_run
from tui.runs_store import load_run, save_run

T0 = datetime(2026, 4, 1, 9, 0, 0, tzinfo=UTC)
IDENTITY = {"url": "http://127.0.0.1:8000", "kind": "openai", "model": "m", "version": "0.33.0"}
SHORT = Send(1, "short 200", None, 200, 1, 128)
EIGHT = Send(2, "8 at once", None, 200, 8, 512)
REQUEST = {"ok": True, "ttft_s": 0.05, "itl_s": [0.005, 0.006], "tpot_s": 0.0055, "e2e_s": 0.061,
           "decode_tok_s": 180.0, "prefill_tok_s": 4000.0}


@pytest.fixture
def runs_dir(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("PHASETOP_API_KEY", raising=False)
    monkeypatch.setenv("PHASETOP_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path / "runs"


def phasetop(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def ui_session(minute: int, *sends: Send) -> dict:
    """A saved UI session that sent `sends`, each answered by one request."""
    started = T0 + timedelta(minutes=minute)
    session = Session(minute, started, IDENTITY["url"], identity=IDENTITY)
    for n, send in enumerate(sends):
        sent = started.timestamp() + n
        session.add_send(send, sent)
        session.add_request(RequestTiming(ok=True, t_sent_unix=sent, token_offsets_s=(0.05, 0.055, 0.061),
                                          prompt_tokens=send.prompt_tokens, output_tokens=3))
    return session_run(session, started)


def probe(minute: int) -> dict:
    started = T0 + timedelta(minutes=minute)
    return new_run("probe", {"prompt_tokens": 200, "max_tokens": 128, "repeat": 3}, IDENTITY, [REQUEST] * 3, {},
                   started, started)


def saved(runs_dir, *runs: dict) -> list[str]:
    """Save `runs`; their ids."""
    for run in runs:
        save_run(run, runs_dir)
    return [run["id"] for run in runs]


def test_a_ui_session_against_a_probe_is_another_kind_refused_then_said_in_text_and_json(runs_dir, capsys):
    probe_id, ui_id = saved(runs_dir, probe(0), ui_session(5, SHORT, SHORT, SHORT))
    code, out, err = phasetop(capsys, "compare", probe_id, ui_id)
    assert (code, out) == (2, "")
    assert "ran different workloads (kind probe → ui;" in err and "sent (none) → short 200 ×3" in err and "--force" in err

    code, out, err = phasetop(capsys, "compare", probe_id, ui_id, "--force")
    assert code == 0, err
    assert out.splitlines()[0].startswith("the workloads differ: kind probe → ui; ")
    assert f"after   {ui_id}  UI session  " in out

    code, out, err = phasetop(capsys, "compare", probe_id, ui_id, "--force", "--json")
    comparison = json.loads(out)
    assert comparison["workload_differs"][0] == "kind probe → ui"
    assert "sent (none) → short 200 ×3" in comparison["workload_differs"]
    assert (comparison["before"]["kind_name"], comparison["after"]["kind_name"]) == ("probe", "UI session")


def test_two_ui_sessions_that_sent_other_presets_are_refused_and_warned_with_the_difference_in_words(runs_dir, capsys):
    before, after = saved(runs_dir, ui_session(0, SHORT, SHORT, EIGHT), ui_session(5, SHORT, SHORT, SHORT))
    code, out, err = phasetop(capsys, "compare", before, after)
    assert (code, out) == (2, "")
    assert "ran different workloads (8 at once sends 1 → 0; short 200 sends 2 → 3)" in err

    code, out, err = phasetop(capsys, "compare", before, after, "--force")
    assert code == 0, err
    assert out.splitlines()[0].startswith("the workloads differ: 8 at once sends 1 → 0; short 200 sends 2 → 3")
    assert "workload changed:" in out

    code, out, err = phasetop(capsys, "compare", before, after, "--force", "--json")
    comparison = json.loads(out)
    assert comparison["workload_differs"] == ["8 at once sends 1 → 0", "short 200 sends 2 → 3"]
    assert {"key": "short 200 sends", "before": "2", "after": "3", "source": "params"} in comparison["params_diff"]


def test_a_preset_of_another_size_is_a_workload_difference_too(runs_dir, capsys):
    longer = Send(1, "short 200", None, 200, 1, 256)
    before, after = saved(runs_dir, ui_session(0, SHORT), ui_session(5, longer))
    code, out, err = phasetop(capsys, "compare", before, after, "--force", "--json")
    assert json.loads(out)["workload_differs"] == ["short 200 max_tokens 128 → 256"]


def test_two_ui_sessions_that_sent_the_same_compare_as_they_are(runs_dir, capsys):
    before, after = saved(runs_dir, ui_session(0, EIGHT, SHORT), ui_session(5, SHORT, EIGHT))
    code, out, err = phasetop(capsys, "compare", before, after)
    assert code == 0, err
    assert "workloads differ" not in out and "workload changed" not in out
    assert "TTFT p50" in out
    code, out, _ = phasetop(capsys, "compare", before, after, "--json")
    comparison = json.loads(out)
    assert comparison["workload_differs"] == [] and comparison["params_diff"] == []
    assert {f["verdict"] for f in comparison["figures"]} <= {"better", "worse", "tie", "not_enough_data"}


def test_runs_names_a_ui_session_with_what_it_sent_and_a_sweep_by_its_experiment(runs_dir, capsys):
    sweep = new_run("sweep", {"vary": "concurrency", "values": [1, 2]}, IDENTITY, [REQUEST], {}, T0, T0)
    ui_id, sweep_id = saved(runs_dir, ui_session(5, SHORT, SHORT, EIGHT), sweep)
    code, out, err = phasetop(capsys, "runs")
    assert code == 0, err
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "  UI session  " in rows[ui_id] and "3 requests sent as short 200 ×2 + 8 at once ×1, TTFT p50" in rows[ui_id]
    assert "  sweep: concurrency  " in rows[sweep_id]
    code, out, _ = phasetop(capsys, "runs", "--json")
    headers = {h["id"]: h for h in json.loads(out)}
    assert (headers[ui_id]["kind"], headers[ui_id]["kind_name"]) == ("ui", "UI session")
    assert (headers[sweep_id]["kind"], headers[sweep_id]["kind_name"]) == ("sweep", "sweep: concurrency")


def test_a_ui_session_an_older_phasetop_saved_as_a_probe_loads_as_a_ui_session(runs_dir, capsys):
    older = new_run("probe", {"source": SESSION_SOURCE}, IDENTITY, [REQUEST], {"source": SESSION_SOURCE}, T0, T0)
    a_probe = probe(1)
    saved(runs_dir, older, a_probe)
    assert load_run(older["id"], runs_dir)["kind"] == "ui"
    assert load_run(a_probe["id"], runs_dir)["kind"] == "probe"
    code, out, _ = phasetop(capsys, "runs", "--json")
    assert {h["id"]: h["kind"] for h in json.loads(out)} == {older["id"]: "ui", a_probe["id"]: "probe"}
    code, _, err = phasetop(capsys, "compare", a_probe["id"], older["id"])
    assert code == 2 and "kind probe → ui" in err, "an older session against a probe is another kind too"


def test_a_sent_tally_of_the_wrong_shape_is_a_reason_not_a_crash(runs_dir, capsys):
    odd = ui_session(0, SHORT)
    odd["params"]["sent"]["short 200"]["sends"] = "three"
    [_, probe_id] = saved(runs_dir, odd, probe(1))
    code, out, err = phasetop(capsys, "runs")
    assert code == 0 and probe_id in out
    assert f"{odd['id']}.json: params.sent.short 200.sends is a string where an int was expected\n" in err
