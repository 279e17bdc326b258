"""Tokens, not chunks, over a real loopback socket: a server that sends several tokens a chunk (vLLM's
--stream-interval, a speculative step), one that sends a token with empty text, one that groups without saying."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import mean, median

import pytest

from testbeds.scripted_server import Script
from tests.hostile import serving
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


@pytest.mark.timing  # two streams' means against each other: on a box loaded by other tests the 1-a-chunk server's 32
# sleeps oversleep more than the 4-a-chunk one's 8 (12.7 against 10.1 ms once, -n 4 on 2 cores)
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
    # A gap folded into the next token's would read two steps at each token after an empty one; the median over those
    # few (not the p99 of all, which one late wake-up on a loaded machine sets) says which.
    after_empty = [gap for token, gap in enumerate(timing.itl_s, start=1) if token % 11 == 0]
    assert median(after_empty) < 1.5 * median(timing.itl_s), "no gap folded into the next token's"
    assert mean(timing.itl_s) == pytest.approx(timing.tpot_s, rel=0.03)


async def test_a_server_that_groups_without_saying_gets_an_estimate_that_says_so():
    timing = await _timed(_grouped(4, per_chunk_usage=False), 4 * STEP_S)
    assert timing.itl_estimated and timing.to_json()["tokens_per_chunk"] is None
    assert mean(timing.itl_s) == pytest.approx(timing.tpot_s, rel=0.03)
    assert summarize(timing.itl_s).p50 == pytest.approx(STEP_S, rel=0.2)


CAPTURES = Path(__file__).parents[1] / "fixtures" / "vllm032"
"""Streams recorded from the real vLLM 0.32 (docs/vllm-streaming.md): held-back bytes, a stream interval of 4, n-gram
speculation, continuous usage, logprobs."""


def _recorded_tokens_per_chunk(lines: list[bytes]) -> tuple[list[int], int]:
    """What each recorded chunk carried by vLLM's own counts (usage on every chunk, else token ids), and the total;
    read here independently of phasetop's parser."""
    carried, total = [], 0
    for line in lines:
        data = line.removeprefix(b"data: ").strip()
        if data == b"[DONE]":
            continue
        event = json.loads(data)
        choice = event["choices"][0] if event["choices"] else None
        if event.get("usage") and choice is not None and "text" in choice:
            carried.append(event["usage"]["completion_tokens"] - total)
            total = event["usage"]["completion_tokens"]
        elif choice is not None and choice.get("token_ids") is not None:
            carried.append(len(choice["token_ids"]))
            total += carried[-1]
        elif event.get("usage"):
            total = event["usage"]["completion_tokens"]
    return carried, total


def _without_usage_on_chunks(lines: list[bytes]) -> list[bytes]:
    """The stream as a server without continuous usage sends it: usage only on the last chunk (no choices)."""
    kept = []
    for line in lines:
        data = line.removeprefix(b"data: ").strip()
        if data != b"[DONE]" and (event := json.loads(data))["choices"]:
            event.pop("usage", None)
            line = b"data: " + json.dumps(event).encode() + b"\n\n"
        kept.append(line)
    return kept


@pytest.mark.parametrize(("capture", "counted_by"), [
    ("held-back-first-token", "usage"), ("held-back-last-token", "usage"), ("stream-interval-4", "usage"),
    ("ngram-speculation", "usage"), ("continuous-usage", "usage"), ("chat-held-back", "usage"),
    ("ngram-speculation", "token_ids"), ("held-back-first-token", "token_ids"), ("eos-finish", "token_ids"),
    ("logprobs-1", "logprobs"), ("chat-logprobs", "logprobs"),
])
async def test_real_vllm_streams_give_every_token_its_place(capture, counted_by):
    lines = [line + b"\n\n" for line in (CAPTURES / f"{capture}.sse").read_bytes().split(b"\n\n") if line.strip()]
    carried, total = _recorded_tokens_per_chunk(lines)
    if counted_by != "usage":
        lines = _without_usage_on_chunks(lines)
    timing = await _timed(lines, 0.002)
    assert timing.ok
    if counted_by == "logprobs":  # these captures asked for no usage: the count is the logprobs' alone
        total = sum(len(event["choices"][0]["logprobs"].get("tokens") or event["choices"][0]["logprobs"]["content"])
                    for event in _events(lines) if event["choices"] and event["choices"][0].get("logprobs"))
        carried = [total]
    else:
        assert timing.output_tokens == total
    assert len(timing.itl_s) == total - 1, "a token with empty text or in a chunk of several is still a token"
    assert not timing.itl_estimated
    if counted_by != "logprobs":
        assert list(timing.chunk_tokens) == [k for k in carried if k]
    assert sum(timing.chunk_tokens) == total


def _events(lines: list[bytes]) -> list[dict]:
    return [json.loads(data) for line in lines if (data := line.removeprefix(b"data: ").strip()) != b"[DONE]"]


async def test_a_real_speculative_stream_without_per_chunk_counts_is_an_estimate_that_says_so():
    lines = [line + b"\n\n" for line in (CAPTURES / "ngram-speculation-per-request.sse").read_bytes().split(b"\n\n")
             if line.strip()]
    timing = await _timed(lines, 0.002)
    assert timing.ok and timing.output_tokens == 20 and timing.itl_estimated
    assert timing.chunk_tokens is None and len(timing.token_offsets_s) < 20
    assert len(timing.itl_s) == len(timing.token_offsets_s) - 1, "a gap a chunk, over the mean tokens a chunk carried"
    assert mean(timing.itl_s) == pytest.approx(timing.tpot_s, rel=0.03)
