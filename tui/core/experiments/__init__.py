"""The domain text's experiments: their plans, their tables' columns, their one-line findings, and
disaggregation's physics and setups."""
