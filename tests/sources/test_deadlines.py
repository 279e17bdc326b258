"""Deadlines against servers that drip: a whole answer (JSON, /metrics, a stream's head) within the timeout,
a stream's body only never silent that long. Each test is bounded itself, so the old code (a per-read
timeout a byte a second never trips) fails it rather than hanging the suite."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests import hostile
from testbeds.scripted_server import Reply, Script
from tui.sources.detect import describe_server
from tui.sources.errors import AnswerTooSlow, ServerTimeout
from tui.sources.http import make_client
from tui.sources.workloads.prompts import count_tokens
from tui.sources.scrape import MetricsScraper
from tui.sources.stream import StreamRequest, measure

TIMEOUT_S = 0.6
"""The client's deadline here; a dripping answer would take minutes."""
BOUND_S = 3 * TIMEOUT_S + 2.0
"""The test's own bound: the deadline, with room for a loaded machine."""


def _request() -> StreamRequest:
    return StreamRequest(api="openai", model="scripted-model", prompt="hello there", max_tokens=8)


async def _within_bound(coroutine):
    started = time.monotonic()
    async with asyncio.timeout(BOUND_S):
        result = await coroutine
    return result, time.monotonic() - started


@pytest.mark.parametrize("path", ["/v1/models", "/version"])
async def test_a_dripping_document_fails_with_the_deadline(path):
    with hostile.serving(hostile.dripping(path, byte_every_s=0.05)) as server:
        async with make_client(server.url, timeout_s=TIMEOUT_S) as client:
            with pytest.raises(ServerTimeout) as raised:
                await _within_bound(describe_server(client, "openai", None))
    message = str(raised.value)
    assert message == f"{server.url}{path}: no complete answer within {TIMEOUT_S:g} s"


async def test_dripping_metrics_fail_with_the_deadline():
    with hostile.serving(hostile.dripping("/metrics", byte_every_s=0.05)) as server:
        async with make_client(server.url, timeout_s=TIMEOUT_S) as client:
            with pytest.raises(ServerTimeout, match=f"/metrics: no complete answer within {TIMEOUT_S:g} s"):
                await _within_bound(MetricsScraper(client).read())


async def test_a_dripping_tokenize_is_no_count_in_time():
    script = Script()
    script.replies["/tokenize"] = Reply({"count": 3, "pad": "x" * 100}, drip_s=0.05)
    with hostile.serving(script) as server:
        async with make_client(server.url, timeout_s=TIMEOUT_S) as client:
            counted, _ = await _within_bound(count_tokens(client, "openai", "scripted-model", "a b c"))
    assert counted is None


async def test_a_per_call_timeout_is_that_calls_deadline():
    """identity.py reads with a `timeout=` of its own (shorter than the client's): the deadline follows it."""
    with hostile.serving(hostile.dripping("/metrics", byte_every_s=0.05)) as server:
        async with make_client(server.url, timeout_s=30.0) as client:
            with pytest.raises(AnswerTooSlow, match=f"^no complete answer within {TIMEOUT_S:g} s$"):
                await _within_bound(client.get("/metrics", timeout=TIMEOUT_S))


async def test_a_per_call_timeout_never_stretches_the_clients():
    with hostile.serving(hostile.dripping("/metrics", byte_every_s=0.05)) as server:
        async with make_client(server.url, timeout_s=TIMEOUT_S) as client:
            with pytest.raises(AnswerTooSlow, match=f"^no complete answer within {TIMEOUT_S:g} s$"):
                await _within_bound(client.get("/metrics", timeout=30.0))


async def test_a_stream_whose_head_drips_fails_with_the_deadline():
    with hostile.serving(hostile.dripping_head(byte_every_s=0.05)) as server:
        async with make_client(server.url, timeout_s=TIMEOUT_S) as client:
            timing, _ = await _within_bound(measure(client, _request()))
    assert not timing.ok
    assert timing.error == f"{server.url}/v1/completions: no complete answer within {TIMEOUT_S:g} s"


async def test_a_stream_that_trickles_is_not_cut_by_the_deadline():
    """Each line well inside the idle deadline, the whole stream well past it: a slow server, served."""
    chunk = b'data: {"choices": [{"index": 0, "text": "tok", "finish_reason": null}]}\n\n'
    script = Script(stream=[chunk] * 7 + [b"data: [DONE]\n\n"], stream_gap_s=TIMEOUT_S / 3)
    with hostile.serving(script) as server:
        async with make_client(server.url, timeout_s=TIMEOUT_S) as client:
            timing, elapsed = await _within_bound(measure(client, _request()))
    assert timing.ok, timing.error
    assert len(timing.token_offsets_s) == 7
    assert elapsed > 2 * TIMEOUT_S
