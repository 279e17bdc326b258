"""Every command against a server whose text is laden with terminal escapes: what reaches the terminal
carries no raw control character, and --json keeps the server's text exact (escaped by the encoder)."""

from __future__ import annotations

import json

import pytest

from tests.hostile import COMMANDS, ESCAPES, escape_laden, phasetop, raw_controls, serving


@pytest.fixture(scope="module")
def laden():
    with serving(escape_laden()) as server:
        yield server


@pytest.fixture(scope="module")
def failing():
    with serving(escape_laden(failing=True)) as server:
        yield server


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_prints_no_raw_control_character(laden, tmp_path, command):
    done = phasetop(tmp_path, *COMMANDS[command], "--url", laden.url)
    out, err = done.stdout, done.stderr
    assert done.returncode == 0, err
    assert raw_controls(out) == [] and raw_controls(err) == [], (out, err)
    if command != "metrics":  # the others name the model
        assert "evil\\x1b]0;pwned-title\\x07" in out + err, "the escapes are shown, made visible"


@pytest.mark.parametrize("command", ["probe", "bench", "sweep"])
def test_an_error_body_with_escapes_is_one_safe_line(failing, tmp_path, command):
    done = phasetop(tmp_path, *COMMANDS[command], "--url", failing.url)
    err = done.stderr
    assert done.returncode == 1, err
    assert raw_controls(done.stdout) == [] and raw_controls(err) == [], err
    assert "engine died\\x1b]0;pwned-title" in err


@pytest.mark.parametrize("command", ["probe", "bench", "ceiling"])
def test_json_keeps_the_server_text_exact(laden, tmp_path, command):
    done = phasetop(tmp_path, *COMMANDS[command], "--url", laden.url, "--json")
    assert done.returncode == 0, done.stderr
    assert raw_controls(done.stdout) == [], "the JSON encoder escapes control characters"
    assert json.loads(done.stdout)["server"]["model"] == f"evil{ESCAPES}model"
