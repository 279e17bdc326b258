"""Async IO that yields core records. The wire sources here (streaming clients, /metrics scrapes, the OTLP
receiver, NVML and psutil samplers); `servers`: every process phasetop supervises; `workloads`: what it sends (`tui.workflows` runs them)."""
