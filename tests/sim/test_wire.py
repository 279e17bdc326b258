"""The simulator on the wire, read with plain httpx: vLLM's shapes, errors, auth and /metrics."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.sim.wire_text import MODEL, events, samples, value
from tui.sim.metrics import ITL_BUCKETS, REQUEST_LATENCY_BUCKETS, TTFT_BUCKETS


async def test_models_lists_the_served_id_with_max_model_len(sim):
    async with httpx.AsyncClient(base_url=sim.url) as client:
        body = (await client.get("/v1/models")).json()
    assert body["object"] == "list"
    [model] = body["data"]
    assert model["id"] == MODEL and model["owned_by"] == "vllm" and model["max_model_len"] == 131072


async def test_streamed_completion_frames_usage_and_done(sim):
    prompt = "Explain memory bandwidth, briefly."
    async with httpx.AsyncClient(base_url=sim.url) as client:
        count = (await client.post("/tokenize", json={"model": MODEL, "prompt": prompt})).json()["count"]
        response = await client.post("/v1/completions", json={
            "model": MODEL, "prompt": prompt, "max_tokens": 7, "stream": True, "stream_options": {"include_usage": True}})
    assert response.headers["content-type"].startswith("text/event-stream")
    payloads = events(response.text)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    content, usage = chunks[:-1], chunks[-1]
    assert len(content) == 7
    assert all(c["object"] == "text_completion" and c["model"] == MODEL for c in chunks)
    assert [c["choices"][0]["finish_reason"] for c in content] == [None] * 6 + ["length"]
    assert usage["choices"] == []
    assert usage["usage"] == {"prompt_tokens": count, "completion_tokens": 7, "total_tokens": count + 7}
    text = "".join(c["choices"][0]["text"] for c in content)
    async with httpx.AsyncClient(base_url=sim.url) as client:
        recount = (await client.post("/tokenize", json={"prompt": text})).json()["count"]
    assert recount == 7


async def test_chat_stream_opens_with_a_role_chunk_and_omits_usage_unless_asked(sim):
    async with httpx.AsyncClient(base_url=sim.url) as client:
        response = await client.post("/v1/chat/completions", json={
            "model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": True})
    payloads = events(response.text)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(c["object"] == "chat.completion.chunk" and c["choices"] for c in chunks)
    assert len(chunks) == 4 and chunks[-1]["choices"][0]["finish_reason"] == "length"


async def test_non_streamed_chat_and_natural_stop(sim):
    async with httpx.AsyncClient(base_url=sim.url, timeout=30) as client:
        body = (await client.post("/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "Say something."}]})).json()
        tokens = (await client.post("/tokenize", json={"messages": [{"role": "user", "content": "Say something."}]})).json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["prompt_tokens"] == tokens["count"]
    assert 48 <= body["usage"]["completion_tokens"] < 208
    assert body["choices"][0]["message"]["role"] == "assistant" and body["choices"][0]["message"]["content"]


async def test_health_and_version(sim):
    async with httpx.AsyncClient(base_url=sim.url) as client:
        health = await client.get("/health")
        version = (await client.get("/version")).json()
    assert health.status_code == 200 and health.content == b""
    assert version["version"] == "0.33.0"
    assert version["phasetop_sim"]["gpu"] == "NVIDIA H100 SXM" and version["phasetop_sim"]["bits"] == "16"


@pytest.mark.parametrize(
    ("path", "body", "status", "words"),
    [
        ("/v1/completions", {"model": "nope", "prompt": "x"}, 404, "The model `nope` does not exist."),
        ("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 131072}, 400, "'max_tokens' or 'max_completion_tokens' is too large"),
        ("/v1/completions", {"model": MODEL, "prompt": list(range(131073))}, 400, "maximum context length is 131072 tokens"),
        ("/v1/chat/completions", {"model": MODEL, "messages": []}, 400, "messages"),
        ("/v1/completions", {"model": MODEL, "prompt": "x", "n": 2}, 400, "n=1"),
    ],
)
async def test_bad_requests_are_answered_as_vllm_does(sim, path, body, status, words):
    async with httpx.AsyncClient(base_url=sim.url) as client:
        response = await client.post(path, json=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert words in error["message"] and error["code"] == status
    assert error["type"] == ("NotFoundError" if status == 404 else "BadRequestError")


async def test_bad_json_is_400(sim):
    async with httpx.AsyncClient(base_url=sim.url) as client:
        response = await client.post("/v1/completions", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 400 and "Invalid JSON" in response.json()["error"]["message"]


async def test_api_key_guards_v1_only(start_sim):
    guarded = start_sim(env={"VLLM_API_KEY": "s3cret-key"})
    async with httpx.AsyncClient(base_url=guarded.url) as client:
        missing = await client.get("/v1/models")
        wrong = await client.get("/v1/models", headers={"Authorization": "Bearer nope"})
        right = await client.get("/v1/models", headers={"Authorization": "bearer s3cret-key"})
        open_paths = [await client.get(p) for p in ("/metrics", "/health", "/version")]
    assert missing.status_code == wrong.status_code == 401
    assert wrong.json() == {"error": "Unauthorized"}
    assert right.status_code == 200
    assert [r.status_code for r in open_paths] == [200, 200, 200]
    assert "s3cret-key" not in open_paths[0].text + open_paths[2].text


async def test_metrics_carry_vllm_names_labels_buckets_and_config(sim):
    async with httpx.AsyncClient(base_url=sim.url) as client:
        before = (await client.get("/metrics")).text
        await client.post("/v1/completions", json={"prompt": list(range(5000, 5040)), "max_tokens": 5})
        response = await client.get("/metrics")
    text = response.text
    assert response.headers["content-type"].startswith("text/plain")
    labels = {"model_name": MODEL, "engine": "0"}
    assert value(text, "vllm:prompt_tokens_total", **labels) - value(before, "vllm:prompt_tokens_total", **labels) == 40
    assert value(text, "vllm:generation_tokens_total", **labels) - value(before, "vllm:generation_tokens_total", **labels) == 5
    assert value(text, "vllm:prefix_cache_queries_total", **labels) - value(before, "vllm:prefix_cache_queries_total", **labels) == 40
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:num_preemptions_total", "vllm:prefix_cache_hits_total", "process_start_time_seconds"):
        assert name in samples(text), name
    found = samples(text)
    for name, buckets in (("vllm:time_to_first_token_seconds", TTFT_BUCKETS), ("vllm:inter_token_latency_seconds", ITL_BUCKETS),
                          ("vllm:e2e_request_latency_seconds", REQUEST_LATENCY_BUCKETS)):
        les = [float(s.labels["le"]) for s in found[f"{name}_bucket"] if s.labels["le"] != "+Inf"]
        assert les == list(buckets)
        assert all(s.labels["engine"] == "0" and s.labels["model_name"] == MODEL for s in found[f"{name}_bucket"])
    assert TTFT_BUCKETS[:3] == (0.001, 0.005, 0.01) and TTFT_BUCKETS[-1] == 2560.0
    [cache] = found["vllm:cache_config_info"]
    assert cache.value == 1
    assert cache.labels["block_size"] == "16" and cache.labels["enable_prefix_caching"] == "True"
    assert cache.labels["num_gpu_blocks"] == "26702" and cache.labels["gpu_memory_utilization"] == "0.9"
    assert value(text, "vllm:request_success_total", finished_reason="length", **labels) >= 1


async def test_client_disconnect_frees_the_kv_blocks(sim):
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as client:
        async with client.stream("POST", "/v1/completions", json={"prompt": list(range(9000, 11000)), "max_tokens": 3000, "stream": True}) as response:
            assert response.status_code == 200
            # Keep the line iterator referenced: an abandoned one is closed by the GC, which closes the
            # connection early (a disconnect before we look).
            lines = response.aiter_lines()
            first = await anext(lines)
            assert first.startswith("data: {"), first
            during = (await client.get("/metrics")).text
        assert value(during, "vllm:kv_cache_usage_perc") > 0
        assert value(during, "vllm:num_requests_running") == 1
        for _ in range(100):
            after = (await client.get("/metrics")).text
            if value(after, "vllm:kv_cache_usage_perc") == 0:
                break
            await asyncio.sleep(0.05)
    assert value(after, "vllm:kv_cache_usage_perc") == 0
    assert value(after, "vllm:num_requests_running") == 0
    assert value(after, "vllm:request_success_total", finished_reason="abort") >= 1
