"""What a server sends, read with its types checked: the chunk readers, the identity documents and the
simulator's flags either give a value or one clear error (ProtocolError, or a ceiling line), never a
TypeError, AttributeError or ZeroDivisionError that would end a bench or a widget."""

from __future__ import annotations

import math
import re
from dataclasses import astuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.core.hardware.server_ceiling import ceiling_for, simulator_ceiling
from tui.sources.chunks import Tally, read_llamacpp, read_ollama, read_openai
from tui.sources.documents import listed_model, llamacpp_props, ollama_first, version_of
from tui.sources.errors import ProtocolError

WHERE = "http://127.0.0.1:1/doc"

# JSON as a parser gives it: orjson keeps integers to 64 bits, so the strategy does too.
scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                           max_leaves=20)
FIELDS = ("choices", "text", "delta", "content", "reasoning", "reasoning_content", "role", "usage", "prompt_tokens",
          "completion_tokens", "prompt_tokens_details", "cached_tokens", "timings", "prompt_n", "cache_n", "predicted_n",
          "prompt_ms", "predicted_ms", "metrics", "message", "response", "thinking", "done", "prompt_eval_count",
          "eval_count", "eval_duration", "stop", "tokens_evaluated", "tokens_predicted", "error", "data", "id",
          "max_model_len", "meta", "size", "n_params", "version", "models", "name", "model", "context_length",
          "model_alias", "model_path", "build_info", "default_generation_settings", "n_ctx")
"""The keys the readers look for: random text alone would hardly ever hit them."""
keyed = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=4), inner, max_size=5),
    max_leaves=25,
)
chunks = st.dictionaries(st.sampled_from(FIELDS), keyed, max_size=6)


@settings(max_examples=200, deadline=None)
@given(chunk=chunks, reader=st.sampled_from([read_openai, read_ollama, read_llamacpp]))
def test_a_reader_returns_text_or_raises_protocol_error(chunk, reader):
    tally = Tally()
    try:
        text = reader(chunk, tally)
    except ProtocolError as error:
        assert str(error).startswith("malformed chunk: ") and "\n" not in str(error)
        return
    assert isinstance(text, str)
    for count in (tally.prompt_tokens, tally.output_tokens, tally.cached_tokens):
        assert count is None or (isinstance(count, int) and count >= 0)


@settings(max_examples=200, deadline=None)
@given(body=json_values | st.dictionaries(st.sampled_from(FIELDS), keyed, max_size=6),
       parse=st.sampled_from([listed_model, version_of, llamacpp_props, ollama_first]))
def test_a_document_parses_or_raises_protocol_error(body, parse):
    try:
        parsed = parse(body, WHERE)
    except ProtocolError as error:
        assert str(error).startswith(f"{WHERE}: the server sent ") and " where " in str(error)
        return
    values = [parsed] if parsed is None or isinstance(parsed, str) else list(astuple(parsed))
    assert all(value is None or isinstance(value, str | int) for value in values)


@settings(max_examples=200, deadline=None)
@given(flags=st.dictionaries(st.sampled_from(["gpu", "model", "bits", "time_scale"]),
                             st.sampled_from(["H100", "Llama-3.1-8B", "0", "-1", "16", "nan", "inf", "1e999", "x", ""])
                             | scalars, max_size=4))
def test_simulator_flags_give_a_ceiling_or_a_line_never_an_exception(flags):
    ceiling = ceiling_for(flags, "scripted-model", None, True)
    if ceiling is not None:
        assert ceiling.line
        assert ceiling.decode_ceiling_tok_s is None or (math.isfinite(ceiling.decode_ceiling_tok_s) and ceiling.decode_ceiling_tok_s > 0)


@pytest.mark.parametrize(("chunk", "message"), [
    ({"choices": "oops"}, "choices is a string ('oops') where a list was expected"),
    ({"choices": {"0": {"text": "x"}}}, "choices is an object"),
    ({"choices": [1, 2]}, "choices[0] is an integer (1) where an object was expected"),
    ({"choices": [{"text": 5}]}, "choices[0].text is an integer (5) where a string was expected"),
    ({"choices": [{"text": ["a"]}]}, "choices[0].text is a list"),
    ({"choices": [{"delta": "hi"}]}, "choices[0].delta is a string ('hi') where an object was expected"),
    ({"choices": [{"delta": {"content": 7}}]}, "choices[0].delta.content is an integer (7)"),
    ({"choices": [], "usage": "lots"}, "usage is a string ('lots') where an object was expected"),
    ({"choices": [], "usage": {"prompt_tokens": "12", "completion_tokens": 3}}, "usage.prompt_tokens is a string ('12')"),
    ({"choices": [], "timings": "fast"}, "timings is a string ('fast') where an object was expected"),
])
def test_openai_odd_shapes_name_the_field(chunk, message):
    with pytest.raises(ProtocolError, match=f"^malformed chunk: {re.escape(message)}"):
        read_openai(chunk, Tally())


@pytest.mark.parametrize(("reader", "chunk", "message"), [
    (read_ollama, {"message": "hello", "done": False}, "message is a string ('hello') where an object was expected"),
    (read_ollama, {"message": {"content": 3}}, "message.content is an integer (3)"),
    (read_ollama, {"response": ["a"]}, "response is a list"),
    (read_ollama, {"response": "", "done": True, "eval_count": "8"}, "eval_count is a string ('8')"),
    (read_llamacpp, {"content": 5, "stop": False}, "content is an integer (5)"),
    (read_llamacpp, {"content": "", "stop": True, "timings": "t"}, "timings is a string ('t')"),
    (read_llamacpp, {"content": "", "stop": True, "tokens_predicted": -3}, "tokens_predicted is an integer (-3)"),
])
def test_ollama_and_llamacpp_odd_shapes_name_the_field(reader, chunk, message):
    with pytest.raises(ProtocolError, match=f"^malformed chunk: {re.escape(message)}"):
        reader(chunk, Tally())


def test_well_formed_chunks_still_read_as_before():
    tally = Tally()
    assert read_openai({"choices": [{"delta": {"role": "assistant"}}]}, tally) == "" and tally.tokens_carried == 0
    assert read_openai({"choices": [{"delta": {"content": "Hi"}}]}, tally) == "Hi" and tally.tokens_carried == 1
    assert read_openai({"choices": [{"text": None}]}, tally) == "" and tally.tokens_carried == 1
    read_openai({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2,
                                          "prompt_tokens_details": {"cached_tokens": 4}}}, tally)
    assert (tally.prompt_tokens, tally.output_tokens, tally.cached_tokens) == (9, 2, 4)
    assert not tally.counted_by_usage, "usage with no choices counts no chunk's tokens"


def test_per_chunk_usage_counts_the_tokens_each_chunk_carried():
    tally = Tally()
    role = {"choices": [{"delta": {"role": "assistant", "content": ""}}], "usage": {"prompt_tokens": 9, "completion_tokens": 0}}
    assert read_openai(role, tally) == "" and tally.tokens_carried == 0
    assert read_openai({"choices": [{"text": "abc"}], "usage": {"prompt_tokens": 9, "completion_tokens": 3}}, tally) == "abc"
    assert tally.tokens_carried == 3 and tally.counted_by_usage
    assert read_openai({"choices": [{"text": ""}], "usage": {"prompt_tokens": 9, "completion_tokens": 4}}, tally) == ""
    assert tally.tokens_carried == 4, "an empty text is a token when the server counts it"


@pytest.mark.parametrize(("parse", "body", "message"), [
    (listed_model, {"data": [{"id": 5}]}, "the server sent 5 as data[0].id where a string was expected"),
    (listed_model, {"data": [{"id": ["a", "b"]}]}, "the server sent ['a', 'b'] as data[0].id where a string was expected"),
    (listed_model, {"data": "m"}, "the server sent 'm' as data where a list was expected"),
    (listed_model, {"data": ["m"]}, "the server sent 'm' as data[0] where an object was expected"),
    (listed_model, {"data": [{"id": "m", "max_model_len": "4096"}]}, "the server sent '4096' as data[0].max_model_len"),
    (listed_model, [1], "the server sent [1] as the answer where an object was expected"),
    (llamacpp_props, {"default_generation_settings": "big"}, "the server sent 'big' as default_generation_settings where an object"),
    (llamacpp_props, {"model_alias": 3}, "the server sent 3 as model_alias where a string"),
    (ollama_first, {"models": [{"name": {"x": 1}}]}, "the server sent {'x': 1} as models[0].name where a string"),
    (ollama_first, {"models": "all"}, "the server sent 'all' as models where a list"),
    (version_of, {"version": ["1"]}, "the server sent ['1'] as version where a string"),
])
def test_a_wrong_type_in_a_document_is_worded(parse, body, message):
    with pytest.raises(ProtocolError, match=f"^{re.escape(WHERE)}: {re.escape(message)}"):
        parse(body, WHERE)


def test_absent_and_null_fields_are_none_and_good_documents_read():
    assert listed_model({"data": [{"id": "m", "max_model_len": None}]}, WHERE).id == "m"
    assert listed_model({"data": []}, WHERE) is None and listed_model(None, WHERE) is None
    props = llamacpp_props({"model_path": "/models/gemma.gguf", "default_generation_settings": {"n_ctx": 4096}}, WHERE)
    assert (props.model, props.n_ctx, props.build_info) == ("gemma.gguf", 4096, None)
    assert version_of({"version": 1.5}, WHERE) == "1.5"
    assert ollama_first({"models": [{"model": "llama3.1:8b", "context_length": 8192}]}, WHERE).name == "llama3.1:8b"


SIM = {"gpu": "H100", "model": "Llama-3.1-8B"}


@pytest.mark.parametrize(("flags", "line"), [
    ({**SIM, "time_scale": "0"}, "ceiling: the simulator sent time_scale '0' where a number above 0 was expected"),
    ({**SIM, "time_scale": "-2"}, "ceiling: the simulator sent time_scale '-2' where a number above 0"),
    ({**SIM, "time_scale": "inf"}, "ceiling: the simulator sent time_scale 'inf' where a number above 0"),
    ({**SIM, "time_scale": "fast"}, "ceiling: the simulator sent time_scale 'fast'"),
    ({**SIM, "bits": "0"}, "ceiling: the simulator sent bits '0' where a whole number from 1 to 64 was expected"),
    ({**SIM, "bits": "4.5"}, "ceiling: the simulator sent bits '4.5'"),
])
def test_unusable_simulator_flags_say_what_was_sent(flags, line):
    ceiling = simulator_ceiling(flags)
    assert ceiling is not None and ceiling.line.startswith(line) and ceiling.decode_ceiling_tok_s is None


def test_a_simulator_model_name_is_never_read_as_a_file(tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 100}')
    assert simulator_ceiling({"gpu": "H100", "model": str(config)}) is None
    assert simulator_ceiling({**SIM, "time_scale": "2"}).mem_bandwidth_gbs == pytest.approx(3350 / 2)
