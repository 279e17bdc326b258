"""q quits at once: the answers in flight are dropped (their connections closed), what finished is saved."""

from __future__ import annotations

import json
import time
from time import perf_counter_ns

import pytest

from tests import hostile
from testbeds.scripted_server import Script
from tests.app.harness import wait_for
from tui.app.app import PhasetopApp
from tui.app.messages import RequestCompleted, ServerCameUp
from tui.config import Settings

pytestmark = pytest.mark.timing

SLOW_ITL_S = 0.1
SLOW_TOKENS = 300
"""A 30 s answer: the old UI's quit waited for it."""
HANG_UP_BOUND_S = 5.0
"""The server must see the connection closed well within this after q (the aim is under a second)."""


async def test_q_drops_the_answer_in_flight_and_saves_the_finished_one(tmp_path):
    seen = []
    script = Script(ttft_s=0.02, itl_s=0.005)
    with hostile.serving(script) as server:
        settings = Settings(_env_file=None, runs_dir=str(tmp_path))
        app = PhasetopApp(settings, server.url)
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            await wait_for(pilot, lambda: any(isinstance(m, ServerCameUp) for m in seen), what="server up")
            await pilot.press("1")
            await wait_for(pilot, lambda: any(isinstance(m, RequestCompleted) for m in seen), what="first answer")
            # The next answer is slow; q while it streams.
            script.tokens, script.itl_s = [f" t{i}" for i in range(SLOW_TOKENS)], SLOW_ITL_S
            await pilot.press("1")
            await wait_for(pilot, lambda: len(server.log) == 2 and len(server.log[1].content_write_ns) >= 3,
                           what="second answer streaming")
            pressed_ns = perf_counter_ns()
            await pilot.press("q")
        slow = server.log[1]
        deadline = time.monotonic() + HANG_UP_BOUND_S
        while slow.hung_up_ns is None and time.monotonic() < deadline:
            time.sleep(0.02)
    assert slow.hung_up_ns is not None, f"the server still streamed {HANG_UP_BOUND_S:.0f} s after q"
    print(f"server saw the hang-up {(slow.hung_up_ns - pressed_ns) / 1e9:.2f} s after q")
    assert len(slow.content_write_ns) < SLOW_TOKENS / 2
    # The finished request is in the session's run, saved as the app closed (its save timer had not fired).
    [saved] = [json.loads(path.read_text()) for path in tmp_path.glob("*.json")]
    assert len(saved["requests"]) >= 1
    assert any(r["ok"] and r["output_tokens"] == 8 for r in saved["requests"])
