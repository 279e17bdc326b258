"""The fleet through Prometheus: which queries read it, one row per instance, the GPUs joined to them, the text."""
