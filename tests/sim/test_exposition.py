"""/metrics from a template: byte for byte what prometheus_client writes, and cheap enough not to delay a step."""

from __future__ import annotations

import asyncio
import re
import statistics
import time

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client import Histogram as ClientHistogram

from tui.core.hardware.devices import find_device
from tui.core.hardware.models import find_model
from tui.sim.engine import TIMER_SLACK_S
from tui.sim.exposition import Exposition, Histogram, generated, histogram, merged
from tui.sim.metrics import ITL_BUCKETS
from tui.sim.options import SimOptions
from tui.sim.step_cost import EngineConfig
from tui.sim.server import new_state

SCRAPES = 30


def _created_masked(text: bytes) -> str:
    return re.sub(r"(_created\{[^}]*\}) \S+", r"\1 T", text.decode())


def test_a_histogram_renders_as_prometheus_client_renders_its_own():
    registry = CollectorRegistry()
    theirs = ClientHistogram("itl", "d", ["m"], registry=registry, buckets=ITL_BUCKETS).labels("x")
    ours = Histogram(ITL_BUCKETS)
    for amount, count in ((0.0078125, 250), (0.5, 3), (90.0, 2), (0.015625, 1)):  # 0.5 on a bound; 90 past the last
        for _ in range(count):
            theirs.observe(amount)
        ours.observe(amount, count)  # sums of these (binary fractions) are exact either way
    assert _created_masked(Exposition([histogram("itl", "d", {"m": "x"}, ours)]).render()) == \
        _created_masked(generate_latest(registry))


async def _busy_state(streams: int, **flags):
    """A simulator's state with `streams` decoding and a few requests finished, its engine still running."""
    config = EngineConfig(device=find_device("H100 SXM"), layout=find_model("8b"))
    state = new_state(SimOptions(config, "meta-llama/Llama-3.1-8B-Instruct", **flags))
    state.driver.start()
    for index in range(3):
        stream = state.driver.submit(list(range(index, index + 40)), 3, "stop")
        while not any(event.finished for event in await stream.take()):
            pass
    for index in range(streams):
        state.driver.submit(list(range(100 + index, 160 + index)), 100_000)
    await asyncio.sleep(0.05)
    return state


async def test_a_scrape_writes_what_generate_latest_writes_of_the_same_values():
    plain = await _busy_state(4)
    worker = await _busy_state(4, enable_mfu_metrics=True, role="decode", engine_label="1")
    try:
        for metrics in (plain.metrics, worker.metrics):
            assert metrics.exposition() == generated(metrics.series, metrics.template.values())
        front = merged([plain.metrics.series, worker.metrics.series])
        template = Exposition(front)
        assert template.render() == generated(front, template.values())
        text = template.render().decode()
        assert text.count("\nprocess_start_time_seconds ") == 1  # the same series from both: once
        assert 'vllm:num_requests_running{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct",role="decode"} 4.0' in text
    finally:
        await plain.driver.stop()
        await worker.driver.stop()


async def test_a_scrape_takes_a_small_part_of_the_room_a_step_leaves_before_its_deadline():
    """The engine wakes `TIMER_SLACK_S` before a deadline, and whatever the loop runs just before must end inside it.

    This measures CPU time on this thread, not wall time, so a busy machine does not make the figure longer.
    prometheus_client's `generate_latest` took 2.2–2.4 ms a scrape here; the template takes about 0.15 ms.
    """
    state = await _busy_state(32)
    try:
        spent = []
        for _ in range(SCRAPES):
            await asyncio.sleep(0.002)  # steps run between scrapes, so the values change
            started = time.thread_time()
            state.metrics.exposition()
            spent.append(time.thread_time() - started)
        assert state.driver.running == 32
        assert statistics.median(spent) < TIMER_SLACK_S / 3, f"{statistics.median(spent) * 1e3:.2f} ms a scrape"
    finally:
        await state.driver.stop()
