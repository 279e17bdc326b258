"""How a child process ended, in words: for the line a person reads when one dies (a simulator, a meter)."""

from __future__ import annotations

import signal


def exit_status(returncode: int) -> str:
    """"exit status 1", "killed by SIGKILL"."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


def last_line(text: str) -> str:
    """The last non-empty line of what a process wrote ("" if none)."""
    lines = text.strip().splitlines()
    return lines[-1].strip() if lines else ""
