"""The embedded simulator: a vLLM- and Ollama-compatible server whose timings follow the roofline."""
