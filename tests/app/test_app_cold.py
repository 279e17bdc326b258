"""A fresh server's first request is marked cold in the UI: the fact is read when the server comes up
(its /metrics counters all 0), and the figures label that request's prefill rate "cold start"."""

from __future__ import annotations

from testbeds.scripted_server import Script, ScriptedServer
from tests.app.harness import CEILING, completed, settings, wait_for
from tui.app.app import PhasetopApp
from tui.app.messages import ServerCameUp
from tui.sources.servers.simulator_server import SimulatorProcess


def came_up(seen) -> list[ServerCameUp]:
    return [m for m in seen if isinstance(m, ServerCameUp)]


def figures(app) -> str:
    return str(app.screen.query_one("#timeline-figures").render())


async def test_a_fresh_simulators_first_request_is_cold_and_the_next_is_not():
    with SimulatorProcess.start([]) as sim:  # its own: a shared one has served other tests' requests
        seen = []
        app = PhasetopApp(settings(), sim.url, "simulated H100 SXM · Llama-3.1-8B", CEILING, save_runs=False)
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            await wait_for(pilot, lambda: came_up(seen))
            assert came_up(seen)[0].fresh is True
            await pilot.press("1")
            await wait_for(pilot, lambda: len(completed(seen)) == 1)
            await pilot.pause(0.1)
            assert completed(seen)[0].timing.cold
            assert "prefill" in figures(app) and "(client, cold start)" in figures(app)
            await pilot.press("1")
            await wait_for(pilot, lambda: len(completed(seen)) == 2)
            await pilot.pause(0.1)
            assert not completed(seen)[1].timing.cold
            assert "cold start" not in figures(app) and "prefill" in figures(app)
            assert app.screen.timings[0].cold  # the first keeps its mark


async def test_a_server_used_since_it_came_up_is_no_longer_fresh():
    """Another client's request between the server coming up and the first send: that send is warm."""
    with SimulatorProcess.start([]) as sim:
        seen = []
        app = PhasetopApp(settings(), sim.url, "simulated H100 SXM · Llama-3.1-8B", CEILING, save_runs=False)
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            await wait_for(pilot, lambda: came_up(seen))
            assert came_up(seen)[0].fresh is True
            response = await app.screen.client.post("/v1/completions", json={
                "model": "meta-llama/Llama-3.1-8B-Instruct", "prompt": "someone else", "max_tokens": 2})
            assert response.status_code == 200
            await pilot.press("1")
            await wait_for(pilot, lambda: len(completed(seen)) == 1)
            assert not completed(seen)[0].timing.cold


async def test_a_server_whose_metrics_cannot_say_marks_nothing_cold():
    server = ScriptedServer(Script(model="meta-llama/Llama-3.1-8B-Instruct")).start()  # no /metrics
    try:
        seen = []
        app = PhasetopApp(settings(), server.url, save_runs=False)
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            await wait_for(pilot, lambda: came_up(seen))
            assert came_up(seen)[0].fresh is None
            await pilot.press("1")
            await wait_for(pilot, lambda: len(completed(seen)) == 1)
            assert not completed(seen)[0].timing.cold
    finally:
        server.stop()
