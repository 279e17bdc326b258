"""Who a server is and how it is configured (for a saved run: what `compare` diffs after a restart),
and whether it has served anything yet (a fresh server's first request pays its cold start).

Everything past what `describe_server` already found is best effort: a server with no /version or
no /metrics (Ollama, llama.cpp without --metrics) gives nulls, never an error.
"""

from __future__ import annotations

import time

import httpx
import psutil

from tui.core.serving.command_flags import command_flags
from tui.core.telemetry.metric_names import read_scrape
from tui.core.telemetry.readings import ServerReading
from tui.sources.detect import ServerInfo
from tui.sources.host import find_listening_process, local_port

IDENTITY_TIMEOUT_S = 5.0
"""Each identity GET waits at most this long: a slow /metrics must not hold up a finished run."""


async def server_identity(client: httpx.AsyncClient, info: ServerInfo) -> dict:
    """The run file's `server` object: identity from `info`, config from /version and /metrics."""
    simulator = await simulator_flags(client)
    engine_config, process_start = _config_of(_reading_of(await _get(client, "/metrics")))
    return {
        "url": info.url,
        "kind": info.kind,
        "model": info.model,
        "version": info.version,
        "max_model_len": info.max_model_len,
        "engine_config": engine_config,
        "process_start_time": process_start,
        "simulator_flags": simulator,
        "command_flags": local_command_flags(info.url),
    }


def local_command_flags(url: str) -> dict[str, str] | None:
    """The flags on the command line of the process serving `url` on this host (no credentials: see
    `tui.core.serving.command_flags`); None for a remote server or one whose process cannot be seen."""
    port = local_port(url)
    if port is None:
        return None
    process, _why = find_listening_process(port)
    try:
        return command_flags(process.cmdline()) if process is not None else None
    except psutil.Error:
        return None


async def simulator_flags(client: httpx.AsyncClient) -> dict[str, str] | None:
    """A phasetop simulator's flags (`/version`'s `phasetop_sim`) as text; None from any other server.

    Only flags with a text, number or boolean value are kept (the simulator publishes strings); what they
    mean is checked where they are used (`tui.core.hardware.server_ceiling.simulator_ceiling`), so an odd flag
    gives a line saying what was sent, not an error that would lose a finished run.
    """
    flags = _json_field(await _get(client, "/version"), "phasetop_sim")
    if not isinstance(flags, dict):
        return None
    return {k: v if isinstance(v, str) else str(v) for k, v in flags.items() if isinstance(v, str | int | float | bool)}


async def server_is_fresh(client: httpx.AsyncClient) -> bool | None:
    """True when the server has served no generation request since its process started, so the next one
    pays its cold start (first CUDA graphs, allocator growth, caches); False when it has; None when its
    /metrics does not say (none exposed, or no generation counter phasetop knows).

    Read from its counters: generated and prompt tokens (vLLM's `vllm:generation_tokens_total`,
    llama.cpp's `llamacpp:tokens_predicted_total`, SGLang's, TGI's) all 0, and nothing running or waiting.
    """
    reading = _reading_of(await _get(client, "/metrics"))
    if reading is None or "generation_tokens_total" not in reading.counters:
        return None
    served = [reading.counters.get(name) for name in ("generation_tokens_total", "prompt_tokens_total")]
    queued = [reading.gauges.get(name) for name in ("running", "waiting")]
    return not any(served + queued)


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


def _reading_of(response: httpx.Response | None) -> ServerReading | None:
    """One /metrics answer in canonical names; None when it is missing or not Prometheus text."""
    if response is None or response.headers.get("content-type", "").startswith(("application/json", "text/html")):
        return None
    try:
        return read_scrape(response.text, time.monotonic(), time.time())
    except ValueError:
        return None


def _config_of(reading: ServerReading | None) -> tuple[dict[str, str] | None, float | None]:
    """Engine config (`vllm:cache_config_info` labels and friends) and process start time from one scrape."""
    if reading is None:
        return None, None
    return dict(reading.engine_config), reading.process_start_s
