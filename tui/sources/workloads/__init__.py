"""What phasetop sends and how it is measured: a load on an arrival schedule, the experiments, the disaggregation
and speculation setups, the roofline's probe, the GPU check's loads, probe's requests, prompts of an exact length.
`tui.workflows.measure` is the one entry point the CLI and the UI measure them through."""
