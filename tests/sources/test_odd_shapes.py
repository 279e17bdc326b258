"""Odd shapes from a real loopback server: a malformed chunk fails its own request with one line (the others
go on and are kept), and an identity document with a wrong type is a ProtocolError naming what was sent."""

from __future__ import annotations

import json

import pytest

from testbeds.scripted_server import Reply, Script
from tests.hostile import OddOnce, serving
from tui.sources.detect import describe_server
from tui.sources.errors import ProtocolError
from tui.sources.http import make_client
from tui.sources.workloads.load import LoadDial, LoadRunner, Workload
from tui.sources.stream import StreamRequest, measure


def sse(*objects: object) -> list[bytes]:
    """An SSE stream of these JSON payloads after one good token, then [DONE]."""
    good = {"choices": [{"index": 0, "text": "Hi"}]}
    return [b"data: " + json.dumps(o).encode() + b"\n\n" for o in (good, *objects)] + [b"data: [DONE]\n\n"]


def ndjson(*objects: object) -> list[bytes]:
    good = {"response": "Hi", "done": False}
    return [json.dumps(o).encode() + b"\n" for o in (good, *objects)]


def native(*objects: object) -> list[bytes]:
    good = {"content": "Hi", "stop": False}
    return [b"data: " + json.dumps(o).encode() + b"\n\n" for o in (good, *objects)]


ODD_STREAMS = [
    ("openai", False, sse({"choices": "oops"}), "choices is a string ('oops') where a list was expected"),
    ("openai", False, sse({"choices": {"0": {"text": "x"}}}), "choices is an object"),
    ("openai", False, sse({"choices": [1, 2, 3]}), "choices[0] is an integer (1) where an object was expected"),
    ("openai", False, sse({"choices": [{"text": 7}]}), "choices[0].text is an integer (7) where a string was expected"),
    ("openai", False, sse({"choices": [{"text": ["a"]}]}), "choices[0].text is a list"),
    ("openai", True, sse({"choices": [{"delta": "hello"}]}), "choices[0].delta is a string ('hello') where an object"),
    ("openai", False, sse({"choices": [], "usage": "lots"}), "usage is a string ('lots') where an object was expected"),
    ("llamacpp", True, sse({"choices": [], "timings": "quick"}), "timings is a string ('quick') where an object"),
    ("ollama", True, ndjson({"message": "hello", "done": False}), "message is a string ('hello') where an object"),
    ("ollama", False, ndjson({"response": "", "done": True, "eval_count": "8"}), "eval_count is a string ('8')"),
    ("llamacpp", False, native({"content": 5, "stop": False}), "content is an integer (5) where a string"),
    ("llamacpp", False, native({"content": "", "stop": True, "timings": "t"}), "timings is a string ('t')"),
]


@pytest.mark.parametrize(("kind", "chat", "lines", "message"), ODD_STREAMS)
async def test_a_malformed_chunk_fails_the_request_with_one_line(kind, chat, lines, message):
    script = Script(kind=kind)
    script.stream = lines
    with serving(script) as server:
        async with make_client(server.url) as client:
            timing = await measure(client, StreamRequest(kind, "scripted-model", "[n0nce] hello there", 8, chat))
    assert not timing.ok
    assert "malformed chunk: " + message in timing.error and timing.error.startswith(server.url)
    assert "\n" not in timing.error
    assert len(timing.token_offsets_s) == 1 and timing.text == "Hi"  # what came before the bad chunk is kept


async def test_one_malformed_answer_among_good_ones_the_others_are_kept():
    with serving(Script(kind="openai"), OddOnce, lines=sse({"choices": "oops"}), odd_request=3) as server:
        async with make_client(server.url) as client:
            info = await describe_server(client, "openai", None)
            runner = LoadRunner(client, info, Workload(prompt_tokens=8, max_tokens=8, num_prompts=5, seed=1), LoadDial(concurrency=1))
            result = await runner.run()
    assert len(result.requests) == 5 and result.aborted is None
    failed = [r for r in result.requests if not r.ok]
    assert len(failed) == 1 and "malformed chunk: choices is a string ('oops')" in failed[0].error
    assert all(r.output_tokens == 8 for r in result.requests if r.ok)
    assert result.figures()["completed"] == 4


ODD_DOCUMENTS = [
    ("openai", "/v1/models", {"object": "list", "data": [{"id": 5}]}, "the server sent 5 as data[0].id where a string was expected"),
    ("openai", "/v1/models", {"data": [{"id": ["a", "b"]}]}, "the server sent ['a', 'b'] as data[0].id"),
    ("openai", "/v1/models", {"data": "all of them"}, "the server sent 'all of them' as data where a list was expected"),
    ("openai", "/version", {"version": {"major": 1}}, "the server sent {'major': 1} as version where a string"),
    ("llamacpp", "/props", {"model_alias": "m", "default_generation_settings": "big"},
     "the server sent 'big' as default_generation_settings where an object was expected"),
    ("llamacpp", "/props", {"model_alias": 12, "build_info": "b1"}, "the server sent 12 as model_alias where a string"),
    ("ollama", "/api/version", {"version": ["0.9"]}, "the server sent ['0.9'] as version where a string"),
    ("ollama", "/api/ps", {"models": "none"}, "the server sent 'none' as models where a list was expected"),
    ("ollama", "/api/ps", {"models": [{"name": 3}]}, "the server sent 3 as models[0].name where a string"),
    ("ollama", "/api/ps", {"models": [{"name": "m", "context_length": "8k"}]}, "the server sent '8k' as models[0].context_length"),
]


@pytest.mark.parametrize(("kind", "path", "body", "message"), ODD_DOCUMENTS)
async def test_a_wrong_type_in_an_identity_document_is_a_protocol_error(kind, path, body, message):
    script = Script(kind=kind)
    script.replies[path] = Reply(body)
    with serving(script) as server:
        async with make_client(server.url) as client:
            with pytest.raises(ProtocolError) as raised:
                await describe_server(client, kind, None)
    assert str(raised.value).startswith(f"{server.url}{path}: {message}")


async def test_a_server_with_a_string_model_id_is_described_as_before():
    with serving(Script(kind="llamacpp")) as server:
        async with make_client(server.url) as client:
            info = await describe_server(client, "llamacpp", None)
    assert (info.model, info.max_model_len, info.version) == ("scripted-model", 4096, "b9999")
