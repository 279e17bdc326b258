"""A server whose JSON says `\\ud93f` (valid JSON; the str it decodes to has no UTF-8): the model id goes back to
it as that escape, text output shows it escaped, --json stays valid, and nothing is an internal error."""

from __future__ import annotations

import json

import pytest

from testbeds.scripted_server import Reply, Script
from tests.hostile import COMMANDS, phasetop, serving
from tui.core.untrusted import one_line, printable, surrogates_escaped

LONE = "\ud93f"
MODEL = f"m{LONE}x"
SHOWN = "m\\ud93fx"
"""How phasetop shows the model id: the escape as text."""
MODELS_JSON = b'{"object": "list", "data": [{"id": "m\\ud93fx", "object": "model", "max_model_len": 4096}]}'
"""The /v1/models answer, escape as the server wrote it."""


def surrogate_server(failing: bool = False) -> Script:
    """A vLLM-like server listing the model `m\\ud93fx` (and echoing it in every chunk, with one in the answer's
    text too); with `failing`, generations answer 500 with an error message holding the same escape."""
    script = Script(model=MODEL, tokens=["Hello", f" {LONE}", " world", "!"])
    script.replies["/v1/models"] = Reply(MODELS_JSON)
    if failing:
        for path in ("/v1/completions", "/v1/chat/completions"):
            script.replies[path] = Reply(b'{"error": {"message": "engine died \\ud93f here", "code": 500}}', status=500)
    return script


@pytest.fixture(scope="module")
def server():
    with serving(surrogate_server()) as running:
        yield running


@pytest.mark.parametrize("command", ["probe", "bench"])
def test_the_model_goes_back_as_the_server_said_and_is_shown_escaped(server, tmp_path, command):
    """It was exit 70, "internal error: TypeError: str is not valid UTF-8: surrogates not allowed"."""
    before = len(server.log)
    done = phasetop(tmp_path, *COMMANDS[command], "--url", server.url)
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stderr
    assert f"model {SHOWN}" in done.stdout
    sent = server.log[before:]
    assert sent and all(entry.body["model"] == MODEL for entry in sent), "the server got back the id it listed"
    (saved,) = (tmp_path / "runs").glob("*.json")
    assert SHOWN in json.loads(saved.read_text(encoding="utf-8"))["server"]["model"]


@pytest.mark.parametrize("command", ["probe", "bench"])
def test_json_output_stays_valid_and_exact(server, tmp_path, command):
    done = phasetop(tmp_path, *COMMANDS[command], "--url", server.url, "--json", "--no-save")
    assert done.returncode == 0, done.stderr
    assert done.stdout.isascii(), "the encoder escapes it"
    assert json.loads(done.stdout)["server"]["model"] == MODEL


def test_an_error_message_with_a_lone_surrogate_is_one_clear_line(tmp_path):
    with serving(surrogate_server(failing=True)) as failing:
        done = phasetop(tmp_path, *COMMANDS["probe"], "--url", failing.url, "--no-save")
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("phasetop probe: request 1 of 1 failed:") and "engine died \\ud93f here" in line, line


def test_untrusted_text_shows_a_lone_surrogate_as_its_escape():
    assert one_line(f"id {MODEL}") == f"id {SHOWN}"
    assert printable(f"line {MODEL}\nnext") == f"line {SHOWN}\nnext"
    assert one_line("\U0001f600 stays") == "\U0001f600 stays", "a real astral character is not a lone surrogate"
    assert surrogates_escaped({"server": {"model": MODEL}, "n": [1, MODEL]}) == {"server": {"model": SHOWN}, "n": [1, SHOWN]}
