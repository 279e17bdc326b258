"""The simulator speculates as vLLM does: K drafts verified a step in one pass, a step's accepted tokens in one SSE
event, vLLM's spec_decode counters; it streams at an interval (--stream-interval) and puts usage on every chunk when
asked (continuous_usage_stats). Its physics reproduce the known result: at batch 1 the decode rate rises by the mean
accepted length, and past the ridge speculation loses. Read off the wire with plain httpx."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest

from tests.sim.wire_text import MODEL, events, samples, value
from tui.core.hardware.devices import find_device
from tui.core.hardware.models import MODELS
from tui.sim.physics import Engine, Sequence
from tui.sim.step_cost import EngineConfig, step_time_s, step_traffic
from tui.sim.speculation import speculation_of

NGRAM = speculation_of("ngram", 3, 0.7)
SPECULATING = ("--speculative", "ngram", "--num-speculative-tokens", "3", "--acceptance", "0.7")
CONTEXT = 300
CONTINUOUS = {"include_usage": True, "continuous_usage_stats": True}


def steady_tok_s(batch: int, speculation=None, context: int = CONTEXT) -> float:
    """Tokens a second of `batch` sequences decoding together, a step each at `context` tokens of context: without
    speculation a token a step, with it the mean accepted length a step of K + 1 verified tokens."""
    config = EngineConfig(find_device("H100"), MODELS["8b"], speculation=speculation)
    if speculation is None:
        return batch / step_time_s(config, [(1, context)] * batch)
    verified = [(1 + speculation.k, context)] * batch
    return batch * speculation.mean_accepted_length / step_time_s(config, verified, drafting=batch)


def run_engine(engine: Engine) -> list[dict[Sequence, int]]:
    """Step an engine until it is idle, with no clock but its own; each step's tokens by sequence."""
    now, steps = 0.0, []
    while engine.has_work:
        plan = engine.schedule(now)
        now += plan.duration_s
        per_sequence: dict[Sequence, int] = {}
        for token in engine.complete(plan, now):
            per_sequence[token.sequence] = per_sequence.get(token.sequence, 0) + 1
        steps.append(per_sequence)
    return steps


def test_speculation_multiplies_decode_at_batch_1_and_loses_past_the_ridge():
    assert NGRAM.mean_accepted_length == pytest.approx((1 - 0.7 ** 4) / (1 - 0.7))
    gain = {batch: steady_tok_s(batch, NGRAM) / steady_tok_s(batch) for batch in (1, 8, 32, 64, 96, 128, 256)}
    assert gain[1] == pytest.approx(NGRAM.mean_accepted_length, rel=0.1)
    assert gain[1] >= gain[8] >= gain[32] > gain[64] > gain[96] > gain[128] > gain[256]
    assert gain[96] > 1 > gain[128], "the turn: the verification's 4 tokens a sequence reach the compute roof"
    assert gain[256] < 0.7, "compute bound: every rejected draft is compute spent for nothing"
    # a longer context reads more KV a step, which speculation does not multiply: the turn comes later
    assert steady_tok_s(128, NGRAM, 2048) > steady_tok_s(128, context=2048)


def test_a_verifying_step_reads_the_weights_once_and_a_draft_model_costs_its_passes():
    config = EngineConfig(find_device("H100"), MODELS["8b"], speculation=NGRAM)
    plain, verified = step_traffic(config, [(1, CONTEXT)] * 8), step_traffic(config, [(4, CONTEXT)] * 8)
    assert verified.read_bytes == plain.read_bytes, "the weights once, each sequence's KV once"
    assert verified.write_bytes == pytest.approx(4 * plain.write_bytes) and verified.flops > 3.9 * plain.flops
    draft = speculation_of("draft", 3, 0.7)
    assert 1 < steady_tok_s(1, draft) / steady_tok_s(1) < steady_tok_s(1, NGRAM) / steady_tok_s(1)
    draft_config = EngineConfig(find_device("H100"), MODELS["8b"], speculation=draft)
    one_pass_s = step_time_s(draft_config, [(4, CONTEXT)], drafting=1) - step_time_s(config, [(4, CONTEXT)], drafting=1)
    assert one_pass_s / 3 == pytest.approx(0.1 * config.weight_bytes / 3350e9 + config.step_overhead_s, rel=0.01)


def test_an_engine_verifies_k_drafts_a_step_and_counts_them_as_vllm_does():
    curve = speculation_of("ngram", 3, curve=(0.9, 0.6, 0.3))
    engine = Engine(EngineConfig(find_device("H100"), MODELS["8b"], speculation=curve))
    sequence = Sequence("0", tuple(range(100)), 200, arrival=0.0)
    engine.add(sequence)
    per_step = [step[sequence] for step in run_engine(engine)]
    counted = engine.counters.speculation
    assert sequence.output_tokens == sum(per_step) == 200 and engine.counters.generation_tokens == 200
    assert per_step[0] == 1 and max(per_step) == 4 and min(per_step) == 1, "the prefill's one token, then 1 to K + 1"
    assert counted.drafts == len(per_step) - 1 and counted.draft_tokens == 3 * counted.drafts, "K a verifying step"
    # a step gives its accepted drafts and one token more; the last one's past max_tokens are counted, not sent
    assert 0 <= counted.accepted_tokens - (200 - len(per_step)) <= 3
    first, second, third = counted.accepted_per_position
    assert first + second + third == counted.accepted_tokens and first >= second >= third
    assert first / counted.drafts == pytest.approx(0.9, abs=0.1) and second / first == pytest.approx(0.6, abs=0.15)
    sure = Engine(EngineConfig(find_device("H100"), MODELS["8b"], speculation=speculation_of("ngram", 3, 1.0)))
    short = Sequence("sure", tuple(range(100)), 7, arrival=0.0)
    sure.add(short)
    assert [step[short] for step in run_engine(sure)] == [1, 4, 2] and sure.counters.generation_tokens == 7
    assert sure.counters.speculation.accepted_tokens == 6, "cut at max_tokens, yet all 3 accepted are counted"
    again = Engine(EngineConfig(find_device("H100"), MODELS["8b"], speculation=curve))
    repeat = Sequence("1", tuple(range(100)), 200, arrival=0.0)
    again.add(repeat)
    assert [step[repeat] for step in run_engine(again)] == per_step, "seeded by the prompt: a run reproduces"


def test_drafts_count_against_the_token_budget_and_a_prompts_last_chunk_still_gives_one_token():
    config = EngineConfig(find_device("H100"), MODELS["8b"], max_num_batched_tokens=10, speculation=NGRAM)
    engine = Engine(config)
    sequences = [Sequence(str(i), tuple(range(i * 100, i * 100 + 3)), 50, arrival=0.0) for i in range(3)]
    for sequence in sequences:
        engine.add(sequence)
    engine.complete(plan := engine.schedule(0.0), plan.duration_s)  # the three prompts, 9 tokens, one step
    assert all(s.output_tokens == 1 for s in sequences)
    plan = engine.schedule(1.0)
    assert [item.drafts for item in plan.items] == [3, 3, 1] and plan.num_tokens == 10, "4 + 4 + what is left"
    chunked = Engine(config)
    sequence = Sequence("long", tuple(range(1000, 1011)), 20, arrival=0.0)  # 10 tokens, then the 11th alone
    chunked.add(sequence)
    steps = run_engine(chunked)
    assert steps[0] == {} and steps[1] == {sequence: 1}, "a prefill's last token is no decode: no drafts ride on it"
    assert max(step[sequence] for step in steps[2:]) == 4


async def stream(client: httpx.AsyncClient, path: str, body: dict) -> list[tuple[float, dict]]:
    """A streamed answer's JSON events, each with the moment its line was read."""
    async with client.stream("POST", path, json={"model": MODEL, "stream": True, **body}) as response:
        lines = [(time.perf_counter(), line) async for line in response.aiter_lines() if line.startswith("data: {")]
    return [(at, json.loads(line[len("data: "):])) for at, line in lines]


def usage_steps(chunks: list[dict]) -> list[int]:
    """Tokens in each chunk that has choices, from its continuous usage (cumulative, so the steps between)."""
    counts = [c["usage"]["completion_tokens"] for c in chunks if c["choices"]]
    return [b - a for a, b in zip([0, *counts], counts)]


async def test_a_speculative_step_is_one_event_and_the_counters_say_so(start_sim):
    sim = start_sim(*SPECULATING)
    prompt = "[n0nce-spec] Explain the roofline."
    async with httpx.AsyncClient(base_url=sim.url, timeout=30) as client:
        before = (await client.get("/metrics")).text
        timed = await stream(client, "/v1/completions", {"prompt": prompt, "max_tokens": 120,
                                                         "stream_options": CONTINUOUS})
        after = (await client.get("/metrics")).text
        plain = events((await client.post("/v1/completions", json={
            "model": MODEL, "prompt": prompt, "max_tokens": 120, "stream": True})).text)
        whole = (await client.post("/v1/completions", json={"model": MODEL, "prompt": prompt, "max_tokens": 120})).json()
    chunks = [chunk for _, chunk in timed]
    content, final = chunks[:-1], chunks[-1]
    sizes = usage_steps(chunks)
    assert sum(sizes) == 120 == final["usage"]["completion_tokens"] and final["choices"] == []
    assert sizes[0] == 1 and set(sizes[1:]) <= {1, 2, 3, 4} and 4 in sizes, "a step's 1 to K + 1 tokens, one event"
    assert sum(sizes) / len(sizes) == pytest.approx(NGRAM.mean_accepted_length, rel=0.25)
    text = "".join(c["choices"][0]["text"] for c in content)
    assert text == whole["choices"][0]["text"], "held-back texts ride along inside and across chunks"
    # without continuous usage the same events go out, with no usage on them
    assert [json.loads(p)["choices"][0]["text"] for p in plain[:-1]] == [c["choices"][0]["text"] for c in content]
    assert all("usage" not in json.loads(p) for p in plain[:-1])
    delta = lambda name, **labels: value(after, name, **labels) - value(before, name, **labels)  # noqa: E731
    drafts = delta("vllm:spec_decode_num_drafts_total", model_name=MODEL)
    accepted = delta("vllm:spec_decode_num_accepted_tokens_total", model_name=MODEL)
    assert drafts == len(content) - 1, "one draft a sequence a verifying step: every step after the first"
    assert delta("vllm:spec_decode_num_draft_tokens_total", model_name=MODEL) == 3 * drafts
    assert 120 - len(content) <= accepted <= 120 - len(content) + 3 and accepted <= 3 * drafts
    per_position = [delta("vllm:spec_decode_num_accepted_tokens_per_pos_total", model_name=MODEL, position=str(p))
                    for p in range(3)]
    assert sum(per_position) == accepted and per_position == sorted(per_position, reverse=True)
    assert delta("vllm:generation_tokens_total", model_name=MODEL) == 120, "every token sent, none of the counted-only"
    info = samples(after)["phasetop_sim_info"][0].labels
    assert (info["speculative"], info["num_speculative_tokens"], info["acceptance"]) == ("ngram", "3", "0.7,0.7,0.7")


async def test_speculation_multiplies_one_streams_decode_rate_by_its_tokens_a_step(start_sim, sim):
    prompt = "[n0nce-rate] Explain the roofline."
    timings = {}
    for name, server in (("plain", sim), ("speculating", start_sim(*SPECULATING))):
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            timings[name] = await stream(client, "/v1/completions", {"prompt": prompt, "max_tokens": 120,
                                                                     "stream_options": CONTINUOUS})
    decode_s = {name: timed[-2][0] - timed[0][0] for name, timed in timings.items()}  # first token to the last
    steps = len(usage_steps([chunk for _, chunk in timings["speculating"]])) - 1
    assert decode_s["plain"] / decode_s["speculating"] == pytest.approx(119 / steps, rel=0.15)
    assert decode_s["plain"] / decode_s["speculating"] > 2, "bandwidth bound: 4 tokens verified for the price of 1"


async def test_continuous_usage_counts_every_chunks_tokens_the_empty_ones_too(sim):
    async with httpx.AsyncClient(base_url=sim.url, timeout=30) as client:
        chat = [c for _, c in await stream(client, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "[n0nce-usage] hi"}], "max_tokens": 24, "stream_options": CONTINUOUS})]
        completion = [c for _, c in await stream(client, "/v1/completions", {
            "prompt": "[n0nce-usage] hi", "max_tokens": 24, "stream_options": CONTINUOUS})]
        asked_less = [c for _, c in await stream(client, "/v1/completions", {
            "prompt": "[n0nce-usage] hi", "max_tokens": 24, "stream_options": {"continuous_usage_stats": True}})]
    prompt_tokens = chat[-1]["usage"]["prompt_tokens"]
    assert chat[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chat[0]["usage"] == {"prompt_tokens": prompt_tokens, "completion_tokens": 0, "total_tokens": prompt_tokens}
    assert [c["usage"]["completion_tokens"] for c in chat[1:-1]] == list(range(1, 25))
    assert all(c["usage"]["total_tokens"] == prompt_tokens + c["usage"]["completion_tokens"] for c in chat)
    counts = [c["usage"]["completion_tokens"] for c in completion if c["choices"]]
    assert counts == list(range(1, 25)), "a token a chunk, each counted"
    assert any(c["choices"][0]["text"] == "" for c in completion if c["choices"]), "a held-back token's event counts"
    assert completion[-1]["choices"] == [] and completion[-1]["usage"]["completion_tokens"] == 24
    assert all("usage" not in c for c in asked_less), "vLLM needs include_usage for continuous usage"


async def test_a_stream_interval_sends_the_first_token_alone_then_every_n(start_sim):
    async with httpx.AsyncClient(base_url=start_sim("--stream-interval", "4").url, timeout=30) as client:
        grouped = [c for _, c in await stream(client, "/v1/completions", {
            "prompt": "[n0nce-interval] hi", "max_tokens": 30, "stream_options": CONTINUOUS})]
        chat = [c for _, c in await stream(client, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "[n0nce-interval] hi"}], "max_tokens": 9})]
    assert usage_steps(grouped) == [1, *[4] * 7, 1], "the first alone, every 4, the remainder at the end"
    assert len(chat) == 1 + 3 and chat[-1]["choices"][0]["finish_reason"] == "length", "role, 1, 4, 4"
    async with httpx.AsyncClient(base_url=start_sim("--stream-interval", "4", *SPECULATING).url, timeout=30) as client:
        both = [c for _, c in await stream(client, "/v1/completions", {
            "prompt": "[n0nce-interval] hi", "max_tokens": 60, "stream_options": CONTINUOUS})]
    sizes = usage_steps(both)
    assert sizes[0] == 1 and sum(sizes) == 60 and all(4 <= n <= 7 for n in sizes[1:-1]), "4 or more, a step's worth over"


async def test_a_simulator_that_does_not_speculate_serves_no_spec_decode_series(sim):
    async with httpx.AsyncClient(base_url=sim.url) as client:
        text = (await client.get("/metrics")).text
    assert "spec_decode" not in text and "speculative" not in samples(text)["phasetop_sim_info"][0].labels


@pytest.mark.parametrize(("flags", "message"), [
    (["--speculative", "ngram", "--api", "ollama"], "Ollama does not speculate"),
    (["--speculative", "ngram", "--acceptance-curve", "0.9,0.5"], "has 2 values for 3 speculative tokens"),
    (["--speculative", "ngram", "--acceptance", "1.5"], "acceptance must be between 0 and 1, got 1.5"),
    (["--speculative", "ngram", "--acceptance-curve", "0.9,x,0.5"], "--acceptance-curve"),
    (["--speculative", "ngram", "--num-speculative-tokens", "0"], "--num-speculative-tokens must be at least 1"),
    (["--speculative", "eagle"], "invalid choice"),
    (["--acceptance", "0.5"], "need --speculative"),
    (["--num-speculative-tokens", "2"], "need --speculative"),
    (["--stream-interval", "0"], "--stream-interval must be at least 1"),
    (["--stream-interval", "2", "--api", "ollama"], "Ollama streams every token"),
])
def test_bad_speculation_flags_are_one_line_and_exit_2(flags, message):
    result = subprocess.run([sys.executable, "-m", "tui", "sim", "--port", "0", *flags], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
    if "invalid choice" not in message:  # argparse's own error prints the usage first
        assert result.stderr.count("\n") == 1
