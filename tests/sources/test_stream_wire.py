"""The pure pieces of the stream clients: line splitting, SSE fields, each API's chunk reader."""

from __future__ import annotations

import re

import pytest

from tui.core.measure.sse import LineSplitter, sse_field
from tui.sources.chunks import Tally, read_llamacpp, read_ollama, read_openai
from tui.sources.workloads.prompts import filler_text, make_nonce
from tui.sources.stream import StreamRequest, route_for


def test_splitter_keeps_a_partial_line_for_the_next_read():
    splitter = LineSplitter()
    assert splitter.feed(b"data: {\"a\"") == []
    assert splitter.feed(b": 1}\r\n\r\ndata: [DO") == [b'data: {"a": 1}', b""]
    assert splitter.pending == b"data: [DO"
    assert splitter.feed(b"NE]\n") == [b"data: [DONE]"]


@pytest.mark.parametrize(
    ("line", "field"),
    [
        (b"data: {}", (b"data", b"{}")),
        (b"data:{}", (b"data", b"{}")),
        (b': keep-alive', None),
        (b"", None),
        (b"retry", (b"retry", b"")),
        (b'error: {"code":500}', (b"error", b'{"code":500}')),
    ],
)
def test_sse_field(line, field):
    assert sse_field(line) == field


def test_openai_chat_role_chunk_carries_no_text():
    tally = Tally()
    assert read_openai({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}, tally) == ""
    assert read_openai({"choices": [{"index": 0, "delta": {"content": "Hi"}}]}, tally) == "Hi"
    assert read_openai({"choices": [{"index": 0, "delta": {"reasoning": "hmm"}}]}, tally) == "hmm"


def test_openai_usage_zeros_on_every_chunk_do_not_erase_the_real_usage():
    tally = Tally()
    read_openai({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 7}}, tally)
    read_openai({"choices": [{"text": "x"}], "usage": {"prompt_tokens": 0, "completion_tokens": 0}}, tally)
    assert (tally.prompt_tokens, tally.output_tokens) == (12, 7)


def test_vllm_metrics_become_the_server_split():
    tally = Tally()
    chunk = {"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 11,
             "prompt_tokens_details": {"cached_tokens": 16}},
             "metrics": {"time_to_first_token_ms": 20.0, "generation_time_ms": 100.0}}
    read_openai(chunk, tally)
    assert tally.split.prefill_s == pytest.approx(0.02)
    assert tally.split.decode_s == pytest.approx(0.1)
    assert tally.split.cached_tokens == 16
    assert tally.split.prompt_tokens == 100


def test_ollama_counters_are_nanoseconds_and_zero_means_absent():
    tally = Tally()
    assert read_ollama({"response": "a", "done": False}, tally) == "a"
    assert not tally.done
    read_ollama({"response": "", "done": True, "prompt_eval_count": 26, "prompt_eval_duration": 130_000_000,
                 "eval_count": 290, "eval_duration": 4_700_000_000, "load_duration": 0}, tally)
    assert tally.done
    assert tally.split.prefill_s == pytest.approx(0.13)
    assert tally.split.decode_s == pytest.approx(4.7)
    assert tally.split.load_s is None
    assert (tally.prompt_tokens, tally.output_tokens) == (26, 290)


def test_llamacpp_timings_and_cache():
    tally = Tally()
    assert read_llamacpp({"content": "tok", "stop": False}, tally) == "tok"
    read_llamacpp({"content": "", "stop": True, "tokens_evaluated": 40,
                   "timings": {"prompt_n": 30, "prompt_ms": 15.0, "predicted_n": 9, "predicted_ms": 90.0, "cache_n": 10}}, tally)
    assert tally.done
    assert tally.split.prefill_tok_s == pytest.approx(2000.0)
    assert tally.split.cached_tokens == 10
    assert tally.prompt_tokens == 40
    assert tally.output_tokens == 9


def test_errors_in_band_are_read_as_one_line():
    tally = Tally()
    read_openai({"error": {"message": "engine\ndied", "code": 500}}, tally)
    assert tally.error == "engine died"
    tally = Tally()
    read_ollama({"error": "model 'x' not found"}, tally)
    assert tally.error == "model 'x' not found"


def test_each_prompt_opens_with_its_own_nonce():
    first, second = make_nonce(), make_nonce()
    assert first != second
    assert re.fullmatch(r"\[\d{12}\]", first)  # digits of a fixed count: the same tokens for every nonce
    text = filler_text(first, 10)
    assert text.startswith(first + " ")
    assert len(text.split()) == 11


@pytest.mark.parametrize(
    ("api", "chat", "path"),
    [
        ("openai", False, "/v1/completions"),
        ("openai", True, "/v1/chat/completions"),
        ("ollama", False, "/api/generate"),
        ("ollama", True, "/api/chat"),
        ("llamacpp", False, "/completion"),
        ("llamacpp", True, "/v1/chat/completions"),
    ],
)
def test_routes_follow_the_spec_table(api, chat, path):
    route = route_for(StreamRequest(api, "m", "hi", 5, chat))
    assert route.path == path
    if path.startswith("/v1/"):
        # usage on every chunk counts the tokens each carried; a server refusing unknown fields: --allow-eos
        assert route.body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
        loose = route_for(StreamRequest(api, "m", "hi", 5, chat, exact_length=False))
        assert loose.body["stream_options"] == {"include_usage": True}
