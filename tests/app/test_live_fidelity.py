"""The live view times tokens as the server wrote them: the screen's records against a scripted server's write log
(a loose bound for a shared test machine; bench/ui_fidelity.py measures it to its targets)."""

from __future__ import annotations

from statistics import median

import pytest

from testbeds.scripted_server import Script, ScriptedServer
from tests.app.harness import completed, settings, wait_for
from tui.app.app import PhasetopApp
from tui.app.messages import ServerCameUp
from tui.sources.wall_clock import unix_at_ns

pytestmark = pytest.mark.timing

TOKENS = 64
LOOSE_ERROR_S = 0.5e-3
"""Per-token ITL error median allowed here (the benchmark's target is 0.2 ms; the UI's was 1.1 ms before it had a meter)."""


def pairs(timings, log):
    """Each record with the server's log of it: the entry whose writes its reads trail most closely."""
    matched, free = [], list(log)
    for timing in timings:
        def lag(entry):
            return median(timing.t_sent_unix + o - unix_at_ns(w) for o, w in zip(timing.token_offsets_s, entry.content_write_ns))
        best = min((e for e in free if len(e.content_write_ns) == len(timing.token_offsets_s)), key=lambda e: abs(lag(e)))
        free.remove(best)
        matched.append((timing, best))
    return matched


async def test_the_live_view_times_eight_streams_as_the_server_wrote_them():
    server = ScriptedServer(Script(tokens=[f" t{i}" for i in range(TOKENS)], ttft_s=0.02, itl_s=0.01)).start()
    seen = []
    try:
        app = PhasetopApp(settings(), server.url, None, None, save_runs=False)
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            await wait_for(pilot, lambda: any(isinstance(m, ServerCameUp) for m in seen), 30)
            await pilot.press("4")
            await wait_for(pilot, lambda: len(completed(seen)) == 8, 60)
            await pilot.press("q")
    finally:
        server.stop()
    timings = [m.timing for m in completed(seen)]
    assert all(t.ok and len(t.token_offsets_s) == TOKENS for t in timings)
    log = [entry for entry in server.log if entry.path == "/v1/completions"]
    errors = []
    for timing, entry in pairs(timings, log):
        writes = [unix_at_ns(w) - timing.t_sent_unix for w in entry.content_write_ns]
        theirs = set(timing.client_gaps)
        errors += [abs((b - a) - (wb - wa)) for i, (a, b, wa, wb) in
                   enumerate(zip(timing.token_offsets_s, timing.token_offsets_s[1:], writes, writes[1:])) if i not in theirs]
    assert len(errors) > 4 * TOKENS, "most gaps are kept: the meter did not call them all its own"
    assert median(errors) < LOOSE_ERROR_S, f"median ITL error {median(errors) * 1e3:.2f} ms"
