"""The load dial's endless run against the simulator: a bounded sample of raw requests, figures over all of them."""

from __future__ import annotations

import asyncio
import math

from tui.sources.detect import describe_server
from tui.sources.http import make_client
from tui.sources.workloads.load import LoadDial, LoadRunner, Workload


async def test_an_endless_load_keeps_a_sample_and_counts_every_request(sim_url):
    async with make_client(sim_url, max_connections=8) as client:
        server = await describe_server(client, "openai", None)
        runner = LoadRunner(client, server, Workload(20, 4, backlog=8, sample=5, seed=3), LoadDial(math.inf, 8))
        task = asyncio.create_task(runner.run())
        while runner.progress().finished < 40:
            await asyncio.sleep(0.05)
        runner.stop()
        result = await task
    assert len(result.requests) == 5 and result.total >= 40
    assert result.requests == sorted(result.requests, key=lambda r: r.t_sent_unix)  # the sample in send order
    figures = result.figures()
    assert figures["completed"] + figures["failed"] == result.total
    assert figures["completed"] == result.total and figures["total_output_tokens"] == 4 * result.total
    # Over every request, not the sample's 5: each one's TTFT and E2E, and its gaps less those a loaded box's client
    # caused (a starved client reads all 4 tokens of a request at once, and those gaps time the meter, not the server).
    assert figures["ttft_s"]["n"] == figures["e2el_s"]["n"] == result.total
    assert figures["itl_s"]["n"] <= 3 * result.total
    assert 1 <= figures["peak_concurrent_requests"] <= 8
    assert result.sample_note() == {"kept": 5, "of": result.total, "method": "uniform random sample (reservoir)",
                                    "figures": "over all requests; percentiles exact"}


async def test_a_finite_run_keeps_every_request(sim_url):
    async with make_client(sim_url, max_connections=8) as client:
        server = await describe_server(client, "openai", None)
        result = await LoadRunner(client, server, Workload(20, 4, num_prompts=12, sample=5, seed=4),
                                  LoadDial(math.inf, 4)).run()
    assert len(result.requests) == 12 == result.total and result.sample_note() is None
    assert result.figures()["completed"] == 12
