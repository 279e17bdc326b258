"""The API key and URL credentials, set every way a user can, against a server that echoes them into its
model id, version, metric labels and error bodies: no command prints them, in text or JSON, and no run
file holds them. (The UI's side: tests/app/test_secrets_ui.py.)"""

from __future__ import annotations

import base64
import json
import subprocess

import pytest

from tests.hostile import COMMANDS, SECRET, echoing_key, phasetop, serving

WAYS = ("env", "dotenv", "toml", "url")
"""PHASETOP_API_KEY; a .env in the working dir; api_key in the TOML config; user:key@ in --url (the client
has no --api-key flag on purpose: argv is visible to every user of the host in `ps`)."""


@pytest.fixture(scope="module")
def echo():
    with serving(echoing_key()) as server:
        yield server


def run(tmp_path, way: str, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {}
    if way == "env":
        env["PHASETOP_API_KEY"] = SECRET
    elif way == "dotenv":
        (tmp_path / ".env").write_text(f"PHASETOP_API_KEY={SECRET}\n")
    elif way == "toml":
        (tmp_path / "config" / "phasetop").mkdir(parents=True)
        (tmp_path / "config" / "phasetop" / "config.toml").write_text(f'api_key = "{SECRET}"\n')
    elif way == "url":
        url = url.replace("http://", f"http://alice:{SECRET}@")
    return phasetop(tmp_path, *args, "--url", url, env=env)


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
def test_no_output_and_no_run_file_shows_the_secret(echo, tmp_path, way, command, as_json):
    done = run(tmp_path, way, echo.url, *COMMANDS[command], *(["--json"] if as_json else []))
    everything = done.stdout + done.stderr + saved(tmp_path)
    assert leaks(everything) == [], everything
    assert "Traceback" not in done.stderr and done.returncode in (0, 1), done.stderr
    if command != "metrics" or as_json:  # metrics' text shows no model id or label
        assert "***" in everything, "the server's echo reached phasetop, redacted"


def test_a_bench_save_file_holds_no_secret(echo, tmp_path):
    target = tmp_path / "bench.json"
    done = run(tmp_path, "env", echo.url, *COMMANDS["bench"], "--save", str(target))
    assert done.returncode == 1  # every request failed (the server answers 500), and says so
    assert not target.exists() or leaks(target.read_text()) == []


def test_a_url_with_credentials_is_reported_without_them(echo, tmp_path):
    done = run(tmp_path, "url", echo.url, *COMMANDS["probe"], "--json")
    assert json.loads(done.stdout)["server"]["url"] == echo.url, "the URL as given, less user:password@"
    [saved_run] = [json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*.json")] or [None]
    assert saved_run is None or saved_run["server"]["url"] == echo.url
