"""How a child process ended, in words: for the line a person reads when one dies (a simulator, a meter)."""

from __future__ import annotations

import re
import signal

_SAYS_WHY = re.compile(r"\b(error|invalid|unrecognized|unknown|exception|failed|cannot|could ?n[o']t|refused)\b", re.I)
"""A line that says why a process gave up, as servers word it (llama-server: "error while handling argument …";
vLLM: "ValueError: …"; Python's argparse: "error: invalid int value")."""


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


def reason_line(text: str) -> str:
    """Why a process that gave up did: the last line of `text` (a tail of what it wrote) that names an error, else its
    last line. llama-server prints its error and then "to show complete usage, run with -h", which says nothing."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return next((line for line in reversed(lines) if _SAYS_WHY.search(line)), lines[-1] if lines else "")
