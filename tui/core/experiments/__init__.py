"""The domain text's experiments: their plans, their rows and their columns, their one-line findings, and
disaggregation's physics and setups."""
