"""Where CLI output goes: one JSON document or a table on stdout; notes and errors on stderr.

Every line for a person goes through `printable` (tui.core.untrusted): a server's text in it, a model id
or an error body, can neither act on the terminal nor show the API key. The JSON document is redacted;
its encoder escapes control characters itself.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from tui.core.untrusted import printable, redact_all

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
    sys.stdout.write(json.dumps(redact_all(_finite(document)), indent=2) + "\n")
    sys.stdout.flush()


def say(text: str) -> None:
    """Lines for a person on stdout (a table, a snapshot), made safe for the terminal."""
    print(terminal_safe(text), flush=True)


def note(message: str) -> None:
    """A progress line or message for a person: stderr, so stdout stays parseable."""
    print(terminal_safe(message), file=sys.stderr, flush=True)


def terminal_safe(text: str) -> str:
    """`printable` line by line: phasetop's own newlines stay, a server's control characters do not act."""
    return "\n".join(printable(line) for line in text.split("\n"))
