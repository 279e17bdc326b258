"""The embedded simulator: a vLLM-compatible server whose timings follow the roofline."""
