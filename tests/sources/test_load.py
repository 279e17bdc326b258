"""The load runner against a real simulator: the concurrency cap, the arrival schedule, the dial, stop."""

from __future__ import annotations

import asyncio
import math
import random

import pytest

from tui.core.measure.arrivals import unit_schedule
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sources.detect import describe_server
from tui.sources.http import make_client
from tui.sources.workloads.load import LoadDial, LoadRunner, Workload
from tui.sources.scrape import MetricsScraper


@pytest.fixture(scope="module")
def sim():
    with SimulatorProcess.start() as process:
        yield process


async def watch_server(client, stop: asyncio.Event) -> list[float]:
    """The simulator's running + waiting requests, read from /metrics until `stop`."""
    scraper = MetricsScraper(client)
    seen = []
    while not stop.is_set():
        snapshot = await scraper.read()
        seen.append((snapshot.running or 0) + (snapshot.waiting or 0))
        await asyncio.sleep(0.01)
    return seen


async def test_max_concurrency_is_never_exceeded(sim):
    async with make_client(sim.url, max_connections=16) as client, make_client(sim.url) as admin:
        server = await describe_server(client, "openai", None)
        runner = LoadRunner(client, server, Workload(50, 48, num_prompts=24, seed=1), LoadDial(math.inf, 3))
        stop = asyncio.Event()
        watcher = asyncio.create_task(watch_server(admin, stop))
        result = await runner.run()
        stop.set()
        on_server = await watcher
    assert len(result.requests) == 24 and all(r.ok for r in result.requests)
    assert result.peak_in_flight == 3  # reached, never passed
    assert len(on_server) > 10 and max(on_server) <= 3
    assert max(on_server) >= 2  # the watcher did see the load


async def test_sends_follow_the_seeded_poisson_schedule(sim):
    rate, n = 25.0, 50
    async with make_client(sim.url, max_connections=n) as client:
        server = await describe_server(client, "openai", None)
        runner = LoadRunner(client, server, Workload(20, 4, num_prompts=n, seed=99), LoadDial(rate, None))
        result = await runner.run()
    planned = [t / rate for t in unit_schedule(n, 1.0, random.Random(99))]
    sent = sorted(r.t_sent_unix - result.started_unix for r in result.requests)
    assert len(sent) == n
    # The last send lands at N / rate (vLLM's rescale), give or take the event loop's lateness.
    assert sent[-1] == pytest.approx(n / rate, abs=0.15)
    lateness = sorted(s - p for s, p in zip(sent, planned))
    assert lateness[len(lateness) // 2] < 0.02 and lateness[0] > -0.005
    assert result.duration_s >= sent[-1]


async def test_the_dial_pauses_resumes_and_changes_concurrency(sim):
    async with make_client(sim.url, max_connections=16) as client:
        server = await describe_server(client, "openai", None)
        dial = LoadDial(rate=0.0, concurrency=2)
        finished = []
        runner = LoadRunner(client, server, Workload(20, 64, backlog=0), dial)
        task = asyncio.create_task(runner.run(on_finished=lambda request, timing: finished.append((request, timing))))
        await asyncio.sleep(0.4)
        assert runner.progress().sent == 0  # rate 0: paused
        dial.rate = math.inf  # closed loop: keep `concurrency` streams going
        await asyncio.sleep(0.6)
        at_two = runner.progress()
        dial.concurrency = 5
        await asyncio.sleep(0.6)
        at_five = runner.progress()
        runner.stop()
        result = await asyncio.wait_for(task, 10)
    assert 0 < at_two.in_flight <= 2 and at_two.sent > 2
    assert at_five.in_flight > 2 and result.peak_in_flight == 5
    assert at_two.waiting == 0  # backlog 0: no arrival waits for a slot
    assert runner.progress().in_flight == 0
    assert len(result.requests) == len(finished) == runner.progress().sent
    assert all(r.ok for r in result.requests)
    assert {id(t) for _, t in finished} == {id(t) for t in result.requests}
    assert len({request.prompt.split()[0] for request, _ in finished}) == len(finished)  # a fresh nonce each


async def test_endless_burst_without_a_limit_is_refused(sim):
    async with make_client(sim.url) as client:
        server = await describe_server(client, "openai", None)
        with pytest.raises(ValueError):
            LoadRunner(client, server, Workload(20, 4), LoadDial(math.inf, None))


@pytest.mark.parametrize(("name", "value"), [("rate", -1.0), ("rate", math.nan), ("concurrency", 0)])
def test_the_dial_refuses_bad_values(name, value):
    dial = LoadDial()
    with pytest.raises(ValueError):
        setattr(dial, name, value)
