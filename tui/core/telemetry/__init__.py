"""What servers report: /metrics read by engine and version and windowed into rates and quantiles, their
history, OTLP spans read as served requests, llama.cpp's slots, and the readings' frozen records."""
