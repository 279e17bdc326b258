"""phasetop: watch prefill and decode live. Importing this package loads nothing heavy."""

__version__ = "0.1.0"
