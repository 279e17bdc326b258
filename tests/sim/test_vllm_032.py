"""What real vLLM 0.32 shows and the simulator must too (real-vllm.md §5): its extra `/metrics` families,
per-request `metrics`, `prompt_tokens_details`, empty-text events, EOS with ignore_eos/min_tokens, and
the too-long-prompt error. Plain httpx over loopback sockets, as test_wire.py."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.sim.wire_text import MODEL, events, samples, value
from tui.core.hardware.devices import find_device
from tui.core.hardware.models import find_model
from tui.sim.step_cost import EngineConfig

LABELS = {"model_name": MODEL, "engine": "0"}
CONFIG = EngineConfig(device=find_device("H100 SXM"), layout=find_model("8b"))
"""The engine every simulator here runs (the launcher's defaults, and the in-process ones)."""


def delta(before: str, after: str, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def stream_chunks(body: str) -> list[dict]:
    payloads = events(body)
    assert payloads[-1] == "[DONE]"
    return [json.loads(p) for p in payloads[:-1]]


async def test_prompt_sources_cache_and_kv_computed_follow_the_prefix_cache(start_sim):
    sim = start_sim("--enable-prompt-tokens-details")
    prompt = list(range(20_000, 20_040))  # 40 tokens: a repeat hits 2 full blocks (the last token is recomputed)
    async with httpx.AsyncClient(base_url=sim.url, timeout=30) as client:
        before = (await client.get("/metrics")).text
        first = (await client.post("/v1/completions", json={"prompt": prompt, "max_tokens": 5})).json()
        second = (await client.post("/v1/completions", json={"prompt": prompt, "max_tokens": 5})).json()
        after = (await client.get("/metrics")).text
    assert first["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    assert second["usage"]["prompt_tokens_details"] == {"cached_tokens": 32}
    by_source = "vllm:prompt_tokens_by_source_total"
    assert delta(before, after, by_source, source="local_compute", **LABELS) == 40 + 8
    assert delta(before, after, by_source, source="local_cache_hit", **LABELS) == 32
    assert delta(before, after, by_source, source="external_kv_transfer", **LABELS) == 0
    assert delta(before, after, "vllm:prompt_tokens_cached_total", **LABELS) == 32
    assert delta(before, after, "vllm:request_prefill_kv_computed_tokens_count", **LABELS) == 2
    assert delta(before, after, "vllm:request_prefill_kv_computed_tokens_sum", **LABELS) == 40 + 8
    # vLLM's frontend counts a step's sampled tokens plus the computed prompt of each request it started.
    assert delta(before, after, "vllm:iteration_tokens_total_sum", **LABELS) == (40 + 8) + 2 * 5
    les = [float(s.labels["le"]) for s in samples(after)["vllm:iteration_tokens_total_bucket"] if s.labels["le"] != "+Inf"]
    assert les == [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]


async def test_every_counter_and_histogram_has_created_and_mfu_counters_stay_zero_without_the_flag(sim):
    async with httpx.AsyncClient(base_url=sim.url, timeout=30) as client:
        await client.post("/v1/completions", json={"prompt": "Count the bytes.", "max_tokens": 3})
        response = await client.get("/metrics")
    assert response.headers["content-type"] == "text/plain; version=1.0.0; charset=utf-8"
    text = response.text
    families = [f for f in text_string_to_metric_families(text) if f.name.startswith("vllm:")]
    timed = [f for f in families if f.type in ("counter", "histogram")]
    assert {"vllm:prompt_tokens_by_source", "vllm:estimated_flops_per_gpu", "vllm:request_prefill_kv_computed_tokens",
            "vllm:iteration_tokens_total"} <= {f.name for f in timed}
    found = samples(text)  # the text parser files each `_created` sample under a name of its own
    for family in timed:
        created = found.get(f"{family.name}_created", [])
        assert created and all(s.value > 1e9 for s in created), family.name
    for name in ("flops", "read_bytes", "write_bytes"):
        assert value(text, f"vllm:estimated_{name}_per_gpu_total", **LABELS) == 0


async def test_mfu_counters_count_the_steps_bytes_and_flops(serve_sim):
    url = serve_sim(enable_mfu_metrics=True)
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        before = (await client.get("/metrics")).text
        await client.post("/v1/completions", json={"prompt": list(range(30_000, 30_100)), "max_tokens": 5})
        after = (await client.get("/metrics")).text
    # 5 steps (a prefill that samples the first token, then 4 decodes), each reading every weight once;
    # KV is written for the 100 prompt tokens and the 4 tokens fed back (the last sampled one never is).
    written = delta(before, after, "vllm:estimated_write_bytes_per_gpu_total", **LABELS)
    assert written == pytest.approx(CONFIG.kv_bytes_per_token * 104, rel=1e-9)
    read = delta(before, after, "vllm:estimated_read_bytes_per_gpu_total", **LABELS)
    kv_read = CONFIG.kv_bytes_per_token * (100 + 101 + 102 + 103)
    assert read == pytest.approx(5 * CONFIG.weight_bytes + kv_read, rel=1e-9)
    assert delta(before, after, "vllm:estimated_flops_per_gpu_total", **LABELS) > 2 * CONFIG.layout.params * 104


async def test_waiting_requests_are_split_by_reason(start_sim):
    sim = start_sim("--max-num-seqs", "1", "--time-scale", "4")
    async with httpx.AsyncClient(base_url=sim.url, timeout=60) as client:
        body = {"prompt": "Wait your turn.", "max_tokens": 200}
        answers = [asyncio.create_task(client.post("/v1/completions", json=body)) for _ in range(3)]
        for _ in range(200):
            during = (await client.get("/metrics")).text
            if value(during, "vllm:num_requests_waiting") == 2:
                break
            await asyncio.sleep(0.01)
        await asyncio.gather(*answers)
    assert value(during, "vllm:num_requests_waiting") == 2
    assert value(during, "vllm:num_requests_waiting_by_reason", reason="capacity", **LABELS) == 2
    assert value(during, "vllm:num_requests_waiting_by_reason", reason="deferred", **LABELS) == 0


async def test_cache_config_info_has_vllm_0_32_labels(sim):
    async with httpx.AsyncClient(base_url=sim.url) as client:
        text = (await client.get("/metrics")).text
    [info] = samples(text)["vllm:cache_config_info"]
    labels = info.labels
    tokens = CONFIG.num_gpu_blocks * 16
    assert labels["num_gpu_blocks"] == str(CONFIG.num_gpu_blocks) and labels["block_size"] == "16"
    assert labels["kv_cache_size_tokens"] == str(tokens)
    assert labels["kv_cache_memory_bytes"] == str(int(tokens * CONFIG.kv_bytes_per_token))
    assert float(labels["kv_cache_max_concurrency"]) == pytest.approx(tokens / 131072)
    assert labels["enable_prefix_caching"] == "True" and labels["engine"] == "0" and "model_name" not in labels
    assert {"cache_dtype", "gpu_memory_utilization", "num_cpu_blocks", "prefix_caching_hash_algo", "sliding_window",
            "mamba_cache_mode", "kv_offloading_backend", "effective_attention_block_size"} <= set(labels)
    assert len(labels) > 30


async def test_per_request_metrics_follow_vllm_definitions(serve_sim):
    url = serve_sim(enable_per_request_metrics=True)
    prompt = list(range(40_000, 42_000))
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        before = (await client.get("/metrics")).text
        response = await client.post("/v1/completions", json={
            "prompt": prompt, "max_tokens": 20, "stream": True, "stream_options": {"include_usage": True}})
        after = (await client.get("/metrics")).text
        whole = (await client.post("/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "Time me."}], "max_tokens": 9})).json()
        unasked = (await client.post("/v1/completions", json={"prompt": "No usage.", "max_tokens": 4, "stream": True})).text
    chunks = stream_chunks(response.text)
    assert all("metrics" not in c for c in chunks[:-1])
    metrics = chunks[-1]["metrics"]
    assert set(metrics) == {"time_to_first_token_ms", "generation_time_ms", "queue_time_ms", "mean_itl_ms", "tokens_per_second"}
    ttft, generation = metrics["time_to_first_token_ms"], metrics["generation_time_ms"]
    assert generation == pytest.approx(19 * metrics["mean_itl_ms"], rel=1e-9)  # n − 1 gaps
    assert metrics["tokens_per_second"] == pytest.approx(20 / ((ttft + generation) / 1000), rel=1e-9)
    # The server's own TTFT histogram runs from arrival: scheduling-based TTFT plus the queue.
    arrival_ttft_ms = delta(before, after, "vllm:time_to_first_token_seconds_sum", **LABELS) * 1000
    assert ttft + metrics["queue_time_ms"] == pytest.approx(arrival_ttft_ms, rel=1e-6)
    assert ttft > 5 * metrics["mean_itl_ms"]  # a 2,000-token prefill, not a decode step
    assert set(whole["metrics"]) == set(metrics) and whole["usage"]["completion_tokens"] == 9
    assert "metrics" not in unasked


async def test_no_metrics_or_prompt_details_without_the_flags(sim):
    async with httpx.AsyncClient(base_url=sim.url, timeout=30) as client:
        body = (await client.post("/v1/completions", json={"prompt": "Plain.", "max_tokens": 3})).json()
    assert "metrics" not in body and "prompt_tokens_details" not in body["usage"]


@pytest.mark.parametrize("chat", [False, True])
async def test_some_events_carry_empty_text_yet_each_is_a_token(sim, chat):
    path = "/v1/chat/completions" if chat else "/v1/completions"
    prompt = {"messages": [{"role": "user", "content": "Stream it."}]} if chat else {"prompt": "Stream it."}
    async with httpx.AsyncClient(base_url=sim.url, timeout=30) as client:
        response = await client.post(path, json={
            **prompt, "max_tokens": 30, "stream": True, "stream_options": {"include_usage": True}})
        chunks = stream_chunks(response.text)
        texts = [c["choices"][0]["delta"]["content"] if chat else c["choices"][0]["text"] for c in chunks[:-1]]
        if chat:
            texts[0] = chunks[1]["choices"][0]["delta"]["content"]  # the role chunk rides with the first token
            texts = [texts[0], *texts[2:]]
        recount = (await client.post("/tokenize", json={"prompt": "".join(texts)})).json()["count"]
    completion_tokens = chunks[-1]["usage"]["completion_tokens"]
    assert completion_tokens == len(texts) == 30
    assert 0 < texts.count("") < 30 and texts[-1] != ""
    assert recount == 30  # a held-back token's text comes with the next event, nothing is lost


async def test_eos_stops_early_unless_ignore_eos_or_min_tokens(serve_sim):
    url = serve_sim(eos_probability=0.2)
    prompt = "Stop when you like."
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:

        async def answer(path: str = "/v1/completions", **extra) -> tuple[int, str]:
            body = {"messages": [{"role": "user", "content": prompt}]} if "chat" in path else {"prompt": prompt}
            reply = (await client.post(path, json={**body, "max_tokens": 60, **extra})).json()
            return reply["usage"]["completion_tokens"], reply["choices"][0]["finish_reason"]

        free = await answer()
        again = await answer()
        ignored = await answer(ignore_eos=True)
        chat_ignored = await answer("/v1/chat/completions", ignore_eos=True)
        held = await answer(min_tokens=50)
        streamed = await client.post("/v1/completions", json={"prompt": prompt, "max_tokens": 60, "stream": True})
        refused = await client.post("/v1/completions", json={"prompt": prompt, "max_tokens": 10, "min_tokens": 11})
    assert free[1] == "stop" and free[0] < 60 and again == free  # seeded per request
    assert ignored == (60, "length") and chat_ignored == (60, "length")
    assert held[0] >= 51
    streamed_chunks = stream_chunks(streamed.text)
    assert len(streamed_chunks) == free[0] and streamed_chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "min_tokens"


@pytest.mark.parametrize("chat", [False, True])
async def test_too_long_a_prompt_is_vllms_400(sim, chat):
    words = " ".join(["word"] * 131_072)
    body = {"messages": [{"role": "user", "content": words}]} if chat else {"prompt": words}
    async with httpx.AsyncClient(base_url=sim.url, timeout=60) as client:
        response = await client.post("/v1/chat/completions" if chat else "/v1/completions", json={"model": MODEL, **body})
    assert response.status_code == 400
    error = response.json()["error"]
    assert response.json() == {"error": {"message": error["message"], "type": "BadRequestError", "param": "input_tokens", "code": 400}}
    assert error["message"].startswith("This model's maximum context length is 131072 tokens. However, your prompt contains ")
    assert error["message"].endswith("input tokens, which exceeds this limit even without any output tokens. "
                                     "Please reduce the length of the input prompt.")
