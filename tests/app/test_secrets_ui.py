"""The UI against servers that echo the API key: into the model id, version, metric labels, the answer
text and error bodies. No pane, toast, screenshot or saved run shows it (the CLI's side:
tests/cli/test_secrets.py). Settings come through load_settings, as `phasetop` makes them."""

from __future__ import annotations

import json

import pytest

from tests.app.harness import wait_for
from tests.hostile import SECRET, echoing_key, serving
from tui.app.app import PhasetopApp
from tui.app.messages import RequestCompleted, ServerCameUp
from tui.config import load_settings


@pytest.fixture
def key_in_env(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("PHASETOP_API_KEY", SECRET)
    return tmp_path


def answering_with_the_key(pieces: int):
    """The echoing server, whose model also "says" the key in its answer (both completion shapes), in
    `pieces` chunks far enough apart that the UI shows each on its own."""
    script = echoing_key()
    for path in ("/v1/completions", "/v1/chat/completions"):
        del script.replies[path]
    said = f"your key is {SECRET}"
    cuts = [len(said) * i // pieces for i in range(pieces + 1)]
    chunks = [{"choices": [{"index": 0, "text": said[a:b], "delta": {"content": said[a:b]}}]} for a, b in zip(cuts, cuts[1:])]
    script.stream = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks] + [b"data: [DONE]\n\n"]
    script.stream_gap_s = 0.3 if pieces > 1 else 0.01
    return script


def everything_shown(app) -> str:
    """The screen as an SVG screenshot, and every toast's title and text."""
    toasts = " ".join(f"{n.title} {n.message}" for n in app._notifications)
    return app.export_screenshot() + toasts


def saved_runs(runs_dir) -> str:
    return "".join(p.read_text() for p in runs_dir.glob("*.json")) if runs_dir.exists() else ""


@pytest.mark.parametrize("scenario", ["answers", "answers-in-pieces", "errors"])
async def test_no_pane_toast_screenshot_or_run_shows_the_key(key_in_env, scenario):
    runs_dir = key_in_env / "runs"
    seen = []
    script = answering_with_the_key(1 if scenario == "answers" else 4) if scenario != "errors" else echoing_key()
    with serving(script) as server:
        settings = load_settings(None, url=server.url, runs_dir=str(runs_dir))
        app = PhasetopApp(settings, server.url, None, None)
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            await wait_for(pilot, lambda: any(isinstance(m, ServerCameUp) for m in seen), what="server up")
            await pilot.press("s")
            await wait_for(pilot, lambda: any(isinstance(m, RequestCompleted) for m in seen), what="request done")
            await pilot.pause(1.0)  # a few repaints and a metrics scrape
            shown = everything_shown(app)
            await pilot.press("q")
    assert SECRET not in shown and SECRET[3:] not in shown
    assert "***" in shown, "the echo reached the screen, redacted"
    assert SECRET not in saved_runs(runs_dir)
    if scenario != "errors":
        assert "your key is ***" in shown.replace("&#160;", " "), "the whole answer is shown once it ended"
