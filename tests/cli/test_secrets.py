"""The API key and URL credentials, set every way a user can, against a server that echoes them into its
model id, version, metric labels and error bodies: no command prints them, in text or JSON, and no run
file holds them. (The UI's side: tests/app/test_secrets_ui.py.)

Each command runs in the test's process as the shell would run it (`tests.cli.running`): its working dir, its
environment and its user config dir set as `tests.hostile.phasetop` sets them for a child, and everything written
to the process's stdout and stderr captured at the file descriptors. A child each was 27 interpreters a run."""

from __future__ import annotations

import base64
import json
import os

import pytest

from tests.cli.running import run as run_cli
from tests.hostile import COMMANDS, SECRET, echoing_key, serving

WAYS = ("env", "dotenv", "toml", "url")
"""PHASETOP_API_KEY; a .env in the working dir; api_key in the TOML config; user:key@ in --url (the client
has no --api-key flag on purpose: argv is visible to every user of the host in `ps`)."""


@pytest.fixture(scope="module")
def echo():
    with serving(echoing_key()) as server:
        yield server


@pytest.fixture
def in_home(monkeypatch, tmp_path):
    """`tmp_path` as the working dir, with no PHASETOP_ variable or user config of this machine's; runs saved under
    tmp_path/runs."""
    for name in [name for name in os.environ if name.startswith("PHASETOP_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("PHASETOP_RUNS_DIR", str(tmp_path / "runs"))
    return monkeypatch


def run(in_home, capfd, tmp_path, way: str, url: str, *args: str) -> tuple[int, str, str]:
    """`phasetop ARGS --url URL` with the key set `way`: its exit status, stdout and stderr."""
    if way == "env":
        in_home.setenv("PHASETOP_API_KEY", SECRET)
    elif way == "dotenv":
        (tmp_path / ".env").write_text(f"PHASETOP_API_KEY={SECRET}\n")
    elif way == "toml":
        (tmp_path / "config" / "phasetop").mkdir(parents=True)
        (tmp_path / "config" / "phasetop" / "config.toml").write_text(f'api_key = "{SECRET}"\n')
    elif way == "url":
        url = url.replace("http://", f"http://alice:{SECRET}@")
    return run_cli(capfd, *args, "--url", url)


def leaks(text: str) -> list[str]:
    """Every form of the secret found in `text`: itself, and the Basic auth header a URL's credentials make."""
    basic = base64.b64encode(f"alice:{SECRET}".encode()).decode()
    return [form for form in (SECRET, SECRET[3:], basic) if form in text]


def saved(tmp_path) -> str:
    runs = tmp_path / "runs"
    return "".join(p.read_text() for p in sorted(runs.rglob("*")) if p.is_file()) if runs.exists() else ""


CASES = [(way, command, False) for way in WAYS for command in sorted(COMMANDS)] + [
    ("env", command, True) for command in sorted(COMMANDS)]
"""Every way × every command as text; JSON for every command (the key's source does not change JSON's path)."""


@pytest.mark.parametrize(("way", "command", "as_json"), CASES)
def test_no_output_and_no_run_file_shows_the_secret(echo, in_home, capfd, tmp_path, way, command, as_json):
    code, out, err = run(in_home, capfd, tmp_path, way, echo.url, *COMMANDS[command], *(["--json"] if as_json else []))
    everything = out + err + saved(tmp_path)
    assert leaks(everything) == [], everything
    assert "Traceback" not in err and code in (0, 1), err
    if command != "metrics" or as_json:  # metrics' text shows no model id or label
        assert "***" in everything, "the server's echo reached phasetop, redacted"


def test_a_bench_save_file_holds_no_secret(echo, in_home, capfd, tmp_path):
    target = tmp_path / "bench.json"
    code, _, _ = run(in_home, capfd, tmp_path, "env", echo.url, *COMMANDS["bench"], "--save", str(target))
    assert code == 1  # every request failed (the server answers 500), and says so
    assert not target.exists() or leaks(target.read_text()) == []


def test_a_url_with_credentials_is_reported_without_them(echo, in_home, capfd, tmp_path):
    _, out, _ = run(in_home, capfd, tmp_path, "url", echo.url, *COMMANDS["probe"], "--json")
    assert json.loads(out)["server"]["url"] == echo.url, "the URL as given, less user:password@"
    [saved_run] = [json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*.json")] or [None]
    assert saved_run is None or saved_run["server"]["url"] == echo.url
