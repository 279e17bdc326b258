"""Async IO that yields core records: streaming clients, /metrics scrapes, NVML and psutil samplers."""
