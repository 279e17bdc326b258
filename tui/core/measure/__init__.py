"""What one request and one load measured, and how sure a figure is: the request records, the measurement
guard (delivery, whose gaps), exact percentiles and bootstrap intervals, `vllm bench serve`'s figures, arrivals."""
