"""Bytes that are not HTTP, from a real loopback server: each failure is one line, and none hangs."""

from __future__ import annotations

import asyncio

import pytest

from tests.sources.raw_answers import BAD_STATUS_LINE, GARBAGE_CHUNK, ONE_TOKEN, SSE_HEAD, raw_generation, raw_server
from tui.sources.detect import detect_api
from tui.sources.errors import ProtocolError, SourceError, parser_reason
from tui.sources.http import json_body, make_client
from tui.sources.stream import StreamRequest, measure


def _request() -> StreamRequest:
    return StreamRequest(api="openai", model="scripted-model", prompt="the quick brown fox", max_tokens=8)


async def test_a_bad_status_line_on_a_stream_is_one_line():
    """It was aiohttp's five lines: "Bad status line:", "Invalid status code:", a blank, the bytes, a caret."""
    with raw_generation([BAD_STATUS_LINE]) as server:
        async with make_client(server.url, timeout_s=5) as client:
            timing = await measure(client, _request())
    assert not timing.ok
    assert timing.error == (f"{server.url}/v1/completions: not an HTTP answer "
                            "(Bad status line: Invalid status code: b'HTTP/1.1 abc OK')")


@pytest.mark.parametrize("gap_s", [0.0, 0.2])
async def test_garbage_where_a_chunk_size_goes_ends_the_stream_in_one_line(gap_s):
    """With the garbage apart from the head (gap 0.2 s), aiohttp's parser closed the connection and left the
    body's reader waiting for ever: no timeout was left to end it."""
    with raw_generation([SSE_HEAD + ONE_TOKEN, GARBAGE_CHUNK], gap_s=gap_s) as server:
        async with make_client(server.url, timeout_s=30) as client:
            async with asyncio.timeout(10):  # well inside the 30 s silence a stream may keep
                timing = await measure(client, _request())
    assert not timing.ok
    assert "\n" not in timing.error
    assert timing.error.startswith(f"{server.url}/v1/completions: not ")
    assert "Invalid character in chunk size: b'zz'" in timing.error, timing.error


async def test_a_bad_status_line_on_detection_is_one_line():
    with raw_server(BAD_STATUS_LINE) as url:
        async with make_client(url, timeout_s=5) as client:
            with pytest.raises(SourceError) as failure:
                await detect_api(client)
    message = str(failure.value)
    assert isinstance(failure.value, ProtocolError)
    assert "\n" not in message and "not an HTTP answer" in message and "abc" in message, message


def test_a_parser_message_is_folded_into_one_line():
    message = "Bad status line:\n  Invalid status code:\n\n  b'HTTP/1.1 abc OK'\n             ^"
    assert parser_reason(message) == "Bad status line: Invalid status code: b'HTTP/1.1 abc OK'"
    assert str(SourceError("first\n  second\r\nthird")) == "first second third"


def test_a_lone_surrogate_goes_back_as_its_json_escape():
    """orjson (and httpx's json=) refuse it: "str is not valid UTF-8: surrogates not allowed"."""
    assert json_body({"model": "m\ud93fx"}) == b'{"model":"m\\ud93fx"}'
    assert json_body({"model": "plain"}) == b'{"model":"plain"}'
