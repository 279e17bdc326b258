"""Whether a server has served anything since it started, from its /metrics: fixture text on a loopback
server (vLLM 0.33, llama.cpp), the simulator before and after a request, and servers that cannot say."""

from __future__ import annotations

import pytest

from tests.fixtures.metrics_server import MetricsServer, fixture, set_value
from tui.core.measure.records import mark_cold
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sources.http import make_client
from tui.sources.identity import server_is_fresh
from tui.sources.stream import StreamRequest, measure

VLLM_SERVED = ("vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:request_success_total",
               "vllm:num_requests_running", "vllm:num_requests_waiting")
LLAMACPP_SERVED = ("llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total")


def zeroed(text: str, names: tuple[str, ...]) -> str:
    """`text` with every sample of these metrics at 0, as a server shows them before its first request."""
    for key in [k for k in _keys(text) if k.partition("{")[0] in names]:
        text = set_value(text, key, 0)
    return text


async def fresh_at(url: str) -> bool | None:
    async with make_client(url) as client:
        return await server_is_fresh(client)


@pytest.mark.parametrize(("name", "served"), [("vllm-0.33.txt", VLLM_SERVED), ("llamacpp-b11434.txt", LLAMACPP_SERVED)])
async def test_all_counters_at_zero_is_fresh_and_any_served_token_is_not(name, served):
    fresh = zeroed(fixture(name), served)
    with MetricsServer([fresh]) as server:
        assert await fresh_at(server.url) is True
    with MetricsServer([fixture(name)]) as server:
        assert await fresh_at(server.url) is False
    generated = next(k for k in _keys(fresh) if k.startswith(("vllm:generation_tokens", "llamacpp:tokens_predicted")))
    one_token = set_value(fresh, generated, 1)
    with MetricsServer([one_token]) as server:
        assert await fresh_at(server.url) is False


async def test_a_request_in_flight_means_not_fresh():
    """Mid-prefill a request has generated nothing yet, but the next one is not the first."""
    running = set_value(zeroed(fixture("vllm-0.33.txt"), VLLM_SERVED), 'vllm:num_requests_running{engine="0",model_name="m"}', 1)
    with MetricsServer([running]) as server:
        assert await fresh_at(server.url) is False


@pytest.mark.parametrize("server", [
    {"bodies": ["not found"], "metrics_status": 404},  # no /metrics (Ollama, llama.cpp without --metrics)
    {"bodies": ["process_start_time_seconds 1.7e9\n"]},  # Prometheus text, but no generation counter known
    {"bodies": ['{"detail": "Not Found"}'], "content_type": "application/json"},
])
async def test_a_server_whose_metrics_cannot_say_is_unknown(server):
    with MetricsServer(**server) as metrics:
        assert await fresh_at(metrics.url) is None


async def test_the_simulator_is_fresh_until_it_serves_a_request():
    with SimulatorProcess.start([]) as sim:
        assert await fresh_at(sim.url) is True
        async with make_client(sim.url) as client:
            answer = await client.post("/v1/completions", json={"model": "meta-llama/Llama-3.1-8B-Instruct",
                                                                "prompt": "hello", "max_tokens": 2})
            assert answer.status_code == 200
        assert await fresh_at(sim.url) is False


async def test_a_probe_of_a_fresh_simulator_marks_its_first_request_cold_and_a_second_probe_does_not():
    """As probe does it: freshness read before the first request, then `mark_cold(requests, server_fresh=…)`."""
    request = StreamRequest(api="openai", model="meta-llama/Llama-3.1-8B-Instruct", prompt="a short prompt", max_tokens=8)

    async def probe(url: str, repeat: int) -> list:
        async with make_client(url) as client:
            fresh = await server_is_fresh(client)
            return mark_cold([await measure(client, request) for _ in range(repeat)], server_fresh=fresh)

    with SimulatorProcess.start([]) as sim:
        first = await probe(sim.url, 2)
        assert [r.ok for r in first] == [True, True] and [r.cold for r in first] == [True, False]
        second = await probe(sim.url, 2)
        assert [r.cold for r in second] == [False, False]


def _keys(text: str) -> list[str]:
    """Each sample's `name{labels}`."""
    return [line.rsplit(" ", 1)[0] for line in text.splitlines() if line and not line.startswith("#")]
