"""Where CLI output goes: one JSON document or a table on stdout; notes and errors on stderr."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

EXIT_OK = 0
EXIT_FAILED = 1
"""The server was unreachable, or a request failed."""
EXIT_USAGE = 2
"""Bad input: flags, files, names."""


class CliError(Exception):
    """A failure worth one line on stderr and a non-zero exit, never a traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _finite(value: Any) -> Any:
    """JSON has no inf or NaN: they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def emit_json(document: Any) -> None:
    """Write one JSON document to stdout, and nothing else there."""
    sys.stdout.write(json.dumps(_finite(document), indent=2) + "\n")
    sys.stdout.flush()


def note(message: str) -> None:
    """A progress line or message for a person: stderr, so stdout stays parseable."""
    print(message, file=sys.stderr, flush=True)
