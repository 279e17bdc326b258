"""Tokens, not chunks, over a real loopback socket: a server that sends several tokens a chunk (vLLM's
--stream-interval, a speculative step), one that sends a token with empty text, one that groups without saying."""

from __future__ import annotations

import json
from statistics import mean

import pytest

from tests.hostile import serving
from tests.scripted_server import Script
from tui.core.measure.stats import summarize
from tui.sources.http import make_client
from tui.sources.stream import StreamRequest, measure

STEP_S = 0.01
TOKENS = 33


def _event(text: str, completion_tokens: int | None = None) -> bytes:
    payload: dict = {"id": "cmpl-1", "choices": [{"index": 0, "text": text, "finish_reason": None}]}
    if completion_tokens is not None:
        payload["usage"] = {"prompt_tokens": 5, "completion_tokens": completion_tokens, "total_tokens": 5 + completion_tokens}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _end(completion_tokens: int) -> list[bytes]:
    usage = {"prompt_tokens": 5, "completion_tokens": completion_tokens, "total_tokens": 5 + completion_tokens}
    return [b"data: " + json.dumps({"id": "cmpl-1", "choices": [], "usage": usage}).encode() + b"\n\n", b"data: [DONE]\n\n"]


def _grouped(per_chunk: int, per_chunk_usage: bool) -> list[bytes]:
    """The first token alone, then chunks of `per_chunk` tokens (TOKENS in all)."""
    lines, sent = [_event("t0", 1 if per_chunk_usage else None)], 1
    while sent < TOKENS:
        sent += per_chunk
        lines.append(_event(" w" * per_chunk, sent if per_chunk_usage else None))
    return lines + _end(TOKENS)


async def _timed(lines: list[bytes], gap_s: float):
    with serving(Script(stream=lines, stream_gap_s=gap_s)) as server:
        async with make_client(server.url) as client:
            return await measure(client, StreamRequest("openai", "scripted-model", "[n0nce] hi", TOKENS))


async def test_four_tokens_a_chunk_give_the_per_token_itl_of_one_a_chunk():
    one = await _timed(_grouped(1, per_chunk_usage=True), STEP_S)
    four = await _timed(_grouped(4, per_chunk_usage=True), 4 * STEP_S)
    assert one.ok and four.ok and one.output_tokens == four.output_tokens == TOKENS
    assert four.tokens_per_chunk == (1, *[4] * 8) and one.tokens_per_chunk is None
    assert len(four.itl_s) == len(one.itl_s) == TOKENS - 1
    assert mean(four.itl_s) == pytest.approx(mean(one.itl_s), rel=0.05)
    assert summarize(four.itl_s).p50 == pytest.approx(summarize(one.itl_s).p50, rel=0.05)
    assert summarize(four.chunk_gaps_s).p50 == pytest.approx(4 * summarize(one.chunk_gaps_s).p50, rel=0.05)


async def test_a_token_with_empty_text_is_a_token_with_its_own_stamp():
    lines = [_event("" if i % 11 == 10 else f" w{i}") for i in range(TOKENS)] + _end(TOKENS)
    timing = await _timed(lines, STEP_S)
    assert len(timing.token_offsets_s) == TOKENS and timing.tokens_per_chunk is None
    itl = summarize(timing.itl_s)
    assert itl.p99 <= 1.5 * itl.p50, "no gap folded into the next token's"
    assert mean(timing.itl_s) == pytest.approx(timing.tpot_s, rel=0.03)


async def test_a_server_that_groups_without_saying_gets_an_estimate_that_says_so():
    timing = await _timed(_grouped(4, per_chunk_usage=False), 4 * STEP_S)
    assert timing.itl_estimated and timing.to_json()["tokens_per_chunk"] is None
    assert mean(timing.itl_s) == pytest.approx(timing.tpot_s, rel=0.03)
    assert summarize(timing.itl_s).p50 == pytest.approx(STEP_S, rel=0.2)
