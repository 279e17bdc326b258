"""`phasetop bench` against a server that answers one request (or all) with a malformed chunk: that request
fails with one line, the others are measured, the table is printed and the run is saved."""

from __future__ import annotations

import json

import pytest

from testbeds.scripted_server import Reply, Script
from tests.hostile import OddOnce, serving
from tui.cli.main import main

ODD = [b'data: {"choices": "oops"}\n\n', b"data: [DONE]\n\n"]


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("PHASETOP_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("PHASETOP_API_KEY", raising=False)


def bench(capsys, url: str, *args: str) -> tuple[int, str, str]:
    code = main(["bench", "--url", url, "--num-prompts", "4", "--max-concurrency", "1", "--prompt-tokens", "8",
                 "--max-tokens", "8", "--seed", "1", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_one_malformed_answer_fails_that_request_and_the_run_is_kept(capsys, tmp_path):
    with serving(Script(kind="openai"), OddOnce, lines=ODD, odd_request=2) as server:
        code, out, err = bench(capsys, server.url, "--save", str(tmp_path / "bench.json"))
    assert code == 1
    assert "Successful requests:" in out and out.count("\n") > 10
    assert "Successful requests:                     3" in out and "Failed requests:                         1" in out
    [line] = [line for line in err.splitlines() if "malformed" in line]
    assert "1 of 4 requests failed; the first: " in line
    assert f"{server.url}/v1/completions: malformed chunk: choices is a string ('oops') where a list was expected" in line
    assert "internal error" not in err and "Traceback" not in err
    document = json.loads((tmp_path / "bench.json").read_text())
    assert [r["ok"] for r in document["requests"]] == [True, False, True, True]
    assert len(list((tmp_path / "runs").rglob("*.json"))) == 1


@pytest.mark.parametrize("lines", [
    [b'data: {"choices": [{"text": 5}]}\n\n', b"data: [DONE]\n\n"],
    [b'data: {"choices": [], "usage": "a lot"}\n\n', b"data: [DONE]\n\n"],
])
def test_every_answer_malformed_is_a_clear_failure_not_an_internal_error(capsys, lines):
    script = Script(kind="openai")
    script.stream = lines
    with serving(script) as server:
        code, out, err = bench(capsys, server.url, "--no-save")
    assert code == 1
    assert "Failed requests:                         4" in out
    assert "4 of 4 requests failed; the first: " in err and "malformed chunk: " in err
    assert "internal error" not in err and "Traceback" not in err


def test_a_string_generation_settings_in_props_is_one_line(capsys):
    script = Script(kind="llamacpp")
    script.replies["/props"] = Reply({"model_alias": "m", "default_generation_settings": "big", "build_info": "b1"})
    with serving(script) as server:
        code, out, err = bench(capsys, server.url, "--no-save")
    assert code == 1 and out == ""
    assert err.strip() == (f"phasetop bench: {server.url}/props: the server sent 'big' as default_generation_settings "
                           "where an object was expected")
