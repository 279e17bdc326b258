"""What phasetop sends and how it is measured: a load on an arrival schedule, the experiments, the
disaggregation setups, the roofline's probe, the GPU check's loads, prompts of an exact length, and `measure`, the
one entry point the CLI and the UI measure through."""
