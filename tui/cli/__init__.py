"""The headless command line: one module per subcommand, each with `register` and `run`."""
