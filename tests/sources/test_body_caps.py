"""Caps on what a server can make phasetop hold: /metrics, JSON documents, one stream line, counted inflated.

The bomb tests watch the process's RSS while it reads (psutil, sampled on a thread): the old client
inflated a 256 MB bomb whole (and decoded it to text on top)."""

from __future__ import annotations

import asyncio
import functools
import threading
import zlib
from contextlib import contextmanager

import psutil
import pytest

from tests import hostile
from testbeds.scripted_server import Reply, Script
from tui.config import LimitSettings
from tui.sources.detect import describe_server
from tui.sources.errors import ProtocolError
from tui.sources.http import BodyLimits, make_client
from tui.sources.scrape import MetricsScraper
from tui.sources.stream import StreamRequest, measure

MB = 2**20


@functools.cache
def _bomb(inflated_mb: int) -> bytes:
    """`inflated_mb` MB of a metric line, gzip'd a megabyte at a time (never held inflated here): ~1/1000 the size."""
    line = b"vllm:num_requests_running 1\n"
    block = line * (MB // len(line))
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    parts = [packer.compress(block) for _ in range(inflated_mb)]
    return b"".join(parts) + packer.flush()


def _bombing(path: str, inflated_mb: int) -> Script:
    script = Script()
    content_type = "text/plain" if path == "/metrics" else "application/json"
    script.replies[path] = Reply(_bomb(inflated_mb), content_type=content_type, headers={"Content-Encoding": "gzip"})
    return script


@contextmanager
def _peak_rss_growth():
    """Yields a list that holds, after the block, the most the process's RSS grew above its start during it."""
    process = psutil.Process()
    start = process.memory_info().rss
    peak = [start]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.002):
            peak[0] = max(peak[0], process.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    growth: list[int] = []
    try:
        yield growth
    finally:
        done.set()
        sampler.join()
        growth.append(max(peak[0], process.memory_info().rss) - start)


async def test_a_gzip_bomb_on_metrics_is_stopped_at_the_cap_and_memory_stays_bounded():
    with hostile.serving(_bombing("/metrics", 256)) as server:
        async with make_client(server.url) as client:
            with _peak_rss_growth() as growth, pytest.raises(ProtocolError) as raised:
                await MetricsScraper(client).read()
    assert str(raised.value) == f"{server.url}/metrics: answer larger than 16 MB: stopped reading"
    print(f"RSS growth against the 256 MB bomb: {growth[0] / MB:.1f} MB")
    assert growth[0] < 80 * MB, f"RSS grew {growth[0] / MB:.0f} MB reading a 256 MB bomb"


async def test_a_gzip_bomb_on_models_is_stopped_at_the_document_cap():
    with hostile.serving(_bombing("/v1/models", 64)) as server:
        async with make_client(server.url) as client:
            with _peak_rss_growth() as growth, pytest.raises(ProtocolError) as raised:
                await describe_server(client, "openai", None)
    assert str(raised.value) == f"{server.url}/v1/models: answer larger than 1 MB: stopped reading"
    assert growth[0] < 40 * MB, f"RSS grew {growth[0] / MB:.0f} MB reading a 64 MB bomb"


async def test_a_plain_document_past_the_cap_is_refused():
    script = Script()
    script.replies["/version"] = Reply({"version": "0.33.0", "pad": "x" * (2 * MB)})
    with hostile.serving(script) as server:
        async with make_client(server.url) as client:
            with pytest.raises(ProtocolError, match="/version: answer larger than 1 MB: stopped reading"):
                await describe_server(client, "openai", None)


async def test_the_caps_come_from_the_settings():
    script = Script()
    script.replies["/metrics"] = Reply("vllm:num_requests_running 1\n" * 100, content_type="text/plain")
    limits = LimitSettings(metrics_max_bytes=1000)
    with hostile.serving(script) as server:
        async with make_client(server.url, limits=limits) as client:
            with pytest.raises(ProtocolError, match="answer larger than 1000 bytes: stopped reading"):
                await MetricsScraper(client).read()


def test_the_settings_defaults_are_the_clients():
    assert LimitSettings().model_dump() == {name: getattr(BodyLimits(), name) for name in BodyLimits.__slots__}


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
async def test_honest_compressed_metrics_are_read(encoding):
    text = b'vllm:num_requests_running{model_name="m"} 3\nvllm:num_requests_waiting{model_name="m"} 2\n'
    wbits = {"gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS, "raw-deflate": -zlib.MAX_WBITS}[encoding]
    packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
    script = Script()
    script.replies["/metrics"] = Reply(packer.compress(text) + packer.flush(), content_type="text/plain",
                                       headers={"Content-Encoding": "gzip" if encoding == "gzip" else "deflate"})
    with hostile.serving(script) as server:
        async with make_client(server.url) as client:
            snapshot = await MetricsScraper(client).read()
    assert (snapshot.running, snapshot.waiting) == (3, 2)


async def test_an_encoding_phasetop_does_not_read_is_one_clear_line():
    script = Script()
    script.replies["/metrics"] = Reply(b"\x1b]0;x\x07\x00", content_type="text/plain", headers={"Content-Encoding": "br"})
    with hostile.serving(script) as server:
        async with make_client(server.url) as client:
            with pytest.raises(ProtocolError) as raised:
                await MetricsScraper(client).read()
    assert "Content-Encoding 'br', which phasetop does not read" in str(raised.value)


async def test_garbage_metrics_are_one_safe_line():
    script = Script()
    script.replies["/metrics"] = Reply(b"\x1b]0;pwned\x07\x89PNG\r\x1a\x00\x00 1\n\x00\x00\x00\rIHDR\n", content_type="text/plain")
    with hostile.serving(script) as server:
        async with make_client(server.url) as client:
            with pytest.raises(ProtocolError) as raised:
                await MetricsScraper(client).read()
    message = str(raised.value)
    assert message.startswith(f"{server.url}/metrics: not Prometheus text (")
    assert "\n" not in message and not hostile.raw_controls(message), message


async def test_a_stream_line_that_never_ends_is_stopped_at_the_cap():
    limits = BodyLimits(line_max_bytes=256 * 1024)
    with hostile.serving(hostile.endless_line(pieces=8)) as server:
        async with make_client(server.url, limits=limits) as client:
            timing = await measure(client, StreamRequest(api="openai", model="m", prompt="hi", max_tokens=4))
    assert not timing.ok
    assert timing.error == f"{server.url}/v1/completions: a stream line longer than 256 kB: stopped reading"


@pytest.mark.parametrize("drip_s", [None, 0.05])
async def test_an_error_body_is_read_only_to_the_cap_and_the_deadline(drip_s):
    script = Script()
    script.replies["/v1/completions"] = Reply(b'{"error": {"message": "' + b"y" * (3 * MB) + b'"}}', status=500,
                                              drip_s=drip_s)
    with hostile.serving(script) as server:
        async with make_client(server.url, timeout_s=0.6) as client, asyncio.timeout(5):
            timing = await measure(client, StreamRequest(api="openai", model="m", prompt="hi", max_tokens=4))
    assert not timing.ok
    assert timing.error.startswith(f"{server.url}/v1/completions: HTTP 500")
    assert len(timing.error) < 400
