"""Who a server is and how it is configured, for a saved run: what `compare` diffs after a restart.

Everything past what `describe_server` already found is best effort: a server with no /version or
no /metrics (Ollama, llama.cpp without --metrics) gives nulls, never an error.
"""

from __future__ import annotations

import time

import httpx

from tui.core.metric_names import read_scrape
from tui.sources.detect import ServerInfo

IDENTITY_TIMEOUT_S = 5.0
"""Each identity GET waits at most this long: a slow /metrics must not hold up a finished run."""


async def server_identity(client: httpx.AsyncClient, info: ServerInfo) -> dict:
    """The run file's `server` object: identity from `info`, config from /version and /metrics."""
    simulator = _json_field(await _get(client, "/version"), "phasetop_sim")
    engine_config, process_start = _config_of(await _get(client, "/metrics"))
    return {
        "url": info.url,
        "kind": info.kind,
        "model": info.model,
        "version": info.version,
        "max_model_len": info.max_model_len,
        "engine_config": engine_config,
        "process_start_time": process_start,
        "simulator_flags": {str(k): str(v) for k, v in simulator.items()} if isinstance(simulator, dict) else None,
    }


async def _get(client: httpx.AsyncClient, path: str) -> httpx.Response | None:
    """The 200 answer to a GET, else None (missing path, refused, timed out)."""
    try:
        response = await client.get(path, timeout=IDENTITY_TIMEOUT_S)
    except httpx.HTTPError:
        return None
    return response if response.status_code == 200 else None


def _json_field(response: httpx.Response | None, key: str) -> object:
    try:
        body = response.json() if response is not None else None
    except ValueError:
        return None
    return body.get(key) if isinstance(body, dict) else None


def _config_of(response: httpx.Response | None) -> tuple[dict[str, str] | None, float | None]:
    """Engine config (`vllm:cache_config_info` labels and friends) and process start time from one scrape."""
    if response is None or response.headers.get("content-type", "").startswith(("application/json", "text/html")):
        return None, None
    try:
        reading = read_scrape(response.text, time.monotonic(), time.time())
    except ValueError:
        return None, None
    return dict(reading.engine_config), reading.process_start_s
