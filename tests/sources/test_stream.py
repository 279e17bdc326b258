"""Stream clients against the scripted loopback server: timing from known delays, counts, splits."""

from __future__ import annotations

import statistics

import pytest

from testbeds.scripted_server import Reply, Script, count_tokens
from tui.sources.detect import describe_server, detect_api
from tui.sources.http import make_client
from tui.sources.workloads.prompts import prompt_of, refit
from tui.sources.stream import ChunkArrived, RequestFinished, StreamRequest, measure, stream, warm_up

TOKENS = ["Hello", ",", " world", "!", " How", " are", " you", "?"]


def _request(api: str, chat: bool = False, **extra) -> StreamRequest:
    return StreamRequest(api=api, model="scripted-model", prompt="[n0nce] the quick brown fox", max_tokens=8, chat=chat, **extra)


@pytest.mark.parametrize(("kind", "chat"), [("openai", False), ("openai", True), ("ollama", False), ("ollama", True), ("llamacpp", False), ("llamacpp", True)])
async def test_ttft_and_itl_follow_the_known_delays(scripted_server, kind, chat):
    scripted_server.script = Script(kind=kind, ttft_s=0.08, itl_s=0.02)
    async with make_client(scripted_server.url) as client:
        timing = await measure(client, _request(kind, chat))
    assert timing.ok, timing.error
    assert timing.text == "".join(TOKENS)
    assert len(timing.token_offsets_s) == len(TOKENS)
    # Wide margins: two shared CPU cores. The lower bound holds exactly: nothing arrives early.
    assert 0.075 <= timing.ttft_s < 0.3
    assert 0.01 < statistics.median(timing.itl_s) < 0.06
    assert 0.01 < timing.tpot_s < 0.06
    assert timing.output_tokens == len(TOKENS)
    assert not timing.tokens_estimated
    assert timing.t_sent_unix > 1.6e9


async def test_role_only_chunk_is_not_the_first_token(scripted_server):
    # The role chunk goes out at once; the first token 0.15 s later. TTFT must be the latter.
    scripted_server.script = Script(kind="openai", ttft_s=0.15, role_chunk=True)
    async with make_client(scripted_server.url) as client:
        timing = await measure(client, _request("openai", chat=True))
    assert timing.ttft_s >= 0.145
    assert len(timing.token_offsets_s) == len(TOKENS)


async def test_server_usage_is_the_truth_and_missing_usage_is_estimated(scripted_server):
    scripted_server.script = Script(kind="openai", tokens=["ab", "cd", "ef"], ttft_s=0.01)
    async with make_client(scripted_server.url) as client:
        counted = await measure(client, _request("openai", prompt_tokens=999, prompt_tokens_estimated=True))
        scripted_server.script.usage = False
        guessed = await measure(client, _request("openai", prompt_tokens=999, prompt_tokens_estimated=True))
    assert counted.prompt_tokens == count_tokens(_request("openai").prompt)  # the server's usage, not 999
    assert counted.output_tokens == 3
    assert not counted.tokens_estimated
    assert guessed.output_tokens == 3  # one per content chunk
    assert guessed.prompt_tokens == 999
    assert guessed.tokens_estimated


async def test_ollama_counters_fill_the_server_split(scripted_server):
    scripted_server.script = Script(kind="ollama", ttft_s=0.04, itl_s=0.01, load_duration_ns=1_500_000_000)
    async with make_client(scripted_server.url) as client:
        timing = await measure(client, _request("ollama"))
    split = timing.server_split
    assert split.prefill_s == pytest.approx(0.04)
    assert split.decode_s == pytest.approx(0.08)
    assert split.load_s == pytest.approx(1.5)
    assert split.output_tokens == len(TOKENS)
    assert timing.prefill_source == "server"


@pytest.mark.parametrize("chat", [False, True])
async def test_llamacpp_timings_fill_the_server_split_native_and_openai_compatible(scripted_server, chat):
    scripted_server.script = Script(kind="llamacpp", ttft_s=0.03, cache_n=3)
    async with make_client(scripted_server.url) as client:
        timing = await measure(client, _request("llamacpp", chat))
    split = timing.server_split
    assert split is not None
    assert split.prefill_s == pytest.approx(0.03)
    assert split.cached_tokens == 3
    assert split.output_tokens == len(TOKENS)
    assert timing.prompt_tokens == split.prompt_tokens + 3


async def test_vllm_per_request_metrics_fill_the_server_split(scripted_server):
    scripted_server.script = Script(kind="openai", ttft_s=0.02, vllm_metrics=True)
    async with make_client(scripted_server.url) as client:
        timing = await measure(client, _request("openai"))
    assert timing.server_split.prefill_s == pytest.approx(0.02)
    assert timing.server_split.output_tokens == len(TOKENS)


async def test_plain_openai_stream_has_no_server_split(scripted_server):
    async with make_client(scripted_server.url) as client:
        timing = await measure(client, _request("openai"))
    assert timing.server_split is None
    assert timing.prefill_source == "client"


async def test_chunks_are_yielded_as_they_arrive_then_the_timing(scripted_server):
    scripted_server.script = Script(kind="openai", ttft_s=0.05, itl_s=0.03)
    events = []
    async with make_client(scripted_server.url) as client:
        async for event in stream(client, _request("openai")):
            events.append(event)
    chunks = [e for e in events if isinstance(e, ChunkArrived)]
    assert isinstance(events[-1], RequestFinished)
    assert [c.text for c in chunks] == TOKENS
    assert tuple(c.offset_s for c in chunks) == events[-1].timing.token_offsets_s


@pytest.mark.timing  # a 2 ms bound on real time: on a loaded box the client's sent stamp ran 2.1 ms late
async def test_connect_time_is_measured_apart_and_the_clock_starts_on_the_wire(scripted_server):
    scripted_server.script = Script(kind="openai", ttft_s=0.05)
    async with make_client(scripted_server.url) as client:
        connect_s = await warm_up(client, "/v1/models")
        timing = await measure(client, _request("openai"), connect_s)
        fresh = await measure(make_client(scripted_server.url), _request("openai"))
    assert 0 < connect_s < 0.5
    assert timing.connect_s == connect_s  # reused the warmed connection
    assert fresh.connect_s is not None and fresh.connect_s > 0  # opened its own, timed by the trace
    server_ttft = [(e.content_write_ns[0] - e.received_ns) / 1e9 for e in scripted_server.log]
    # Client TTFT is never shorter than the server's own (request on the wire → first write).
    assert timing.ttft_s >= server_ttft[0] - 0.002


@pytest.mark.parametrize("kind", ["openai", "ollama", "llamacpp"])
async def test_auto_detection_and_server_description(scripted_server, kind):
    scripted_server.script = Script(kind=kind, model=f"{kind}-model", max_model_len=8192)
    async with make_client(scripted_server.url) as client:
        detected = await detect_api(client)
        info = await describe_server(client, detected, None)
        chosen = await describe_server(client, detected, "other-model")
    assert detected == kind
    assert info.model == f"{kind}-model"
    assert info.max_model_len == 8192
    assert info.version
    assert chosen.model == "other-model"


@pytest.mark.parametrize(("kind", "n_tokens"), [("openai", 200), ("llamacpp", 37), ("openai", 5)])
async def test_prompts_of_exactly_n_tokens_via_tokenize(scripted_server, kind, n_tokens):
    scripted_server.script = Script(kind=kind)
    async with make_client(scripted_server.url) as client:
        first = await prompt_of(client, kind, "scripted-model", n_tokens)
        second = await prompt_of(client, kind, "scripted-model", n_tokens)
    assert first.tokens == n_tokens and not first.estimated
    assert count_tokens(first.text) == n_tokens
    assert first.text.split()[0] != second.text.split()[0]  # a new nonce each time


@pytest.mark.parametrize("n_tokens", [13, 200, 1024, 2000])
async def test_prompt_lengths_are_exact_on_a_small_vocabulary_whatever_the_nonce_costs(scripted_server, n_tokens):
    # ~1.7 tokens a filler word and nonces of 2–14 tokens: one-word-one-token fitting sent 231–242 for 200.
    scripted_server.script = Script(kind="openai", tokenizer="small-vocab")
    async with make_client(scripted_server.url) as client:
        prompts = [await prompt_of(client, "openai", "scripted-model", n_tokens) for _ in range(3)]
        again = [await refit(client, "openai", "scripted-model", prompts[0], n_tokens) for _ in range(3)]
    for prompt in prompts + again:
        assert not prompt.estimated
        assert count_tokens(prompt.text, "small-vocab") == prompt.tokens == n_tokens
    assert len({p.text.split()[0] for p in prompts + again}) == 6  # every prompt its own nonce


async def test_a_length_below_the_nonce_is_returned_as_the_closest_it_can_be(scripted_server):
    scripted_server.script = Script(kind="openai", tokenizer="small-vocab")
    async with make_client(scripted_server.url) as client:
        prompt = await prompt_of(client, "openai", "scripted-model", 1)
    assert prompt.tokens == count_tokens(prompt.text, "small-vocab") > 1  # says what it is, never claims 1
    assert not prompt.estimated


async def test_without_a_tokenizer_the_prompt_length_is_marked_estimated(scripted_server):
    scripted_server.script = Script(kind="ollama")
    async with make_client(scripted_server.url) as client:
        prompt = await prompt_of(client, "ollama", "scripted-model", 100)
    assert prompt.estimated
    assert prompt.tokens == 100
    assert 80 <= len(prompt.text.split()) <= 100


@pytest.mark.parametrize("fault", [b'{"error": {"message": "engine died", "code": 500}}', b'{"choices": [{"text": "x"'],
                         ids=["error-event", "malformed"])
async def test_tokens_read_together_with_a_fault_are_kept(scripted_server, fault):
    """Two tokens and the fault behind them in one read (a client that read late, a proxy that buffers): the request
    fails with the fault's line, and both tokens, which did arrive, are in its record."""
    token = b'data: {"id": "c", "choices": [{"index": 0, "text": "%s", "finish_reason": null}]}\n\n'
    body = token % b"Hello" + token % b" world" + b"data: " + fault + b"\n\ndata: [DONE]\n\n"
    scripted_server.script = Script(replies={"/v1/completions": Reply(body, content_type="text/event-stream")})
    async with make_client(scripted_server.url) as client:
        timing = await measure(client, _request("openai"))
    assert not timing.ok and ("engine died" in timing.error or "malformed" in timing.error), timing.error
    assert len(timing.token_offsets_s) == 2 and timing.text == "Hello world"
