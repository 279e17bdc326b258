"""How a measurement runs from start to end, for the CLI and the UI alike, on typed parameters: `measure` (an
experiment, a load, a probe, each with its run record, judged by the one guard) and `tune` (a server started at
each setting, the same workload on each, repeated until the lead is sure). Above the IO of `tui.sources`; neither
prints nor draws: what a person is told goes through the callbacks given."""
