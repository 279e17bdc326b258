"""What a UI session sent: each preset (and the typed prompts) with how many times and at which sizes.

A UI session has no flags to name its workload: what it sent is its workload. Saved as the run's `params.sent`
(`{"short 200": {"sends": 3, "concurrency": 1, "prompt_tokens": 200, "max_tokens": 128}, "typed": …}`), it is
said in words in a run's summary, and two runs' differences are rows of compare's workload diff, so a session
that sent other presets (or as many other times) is refused or warned of as any other workload change.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tui.core.measure.sends import Send

SENT_PARAM = "sent"
"""The params key of a UI session's tally."""
SIZES = ("concurrency", "prompt_tokens", "max_tokens")
"""What one send of a preset is: requests at once, prompt tokens (None for a typed prompt), tokens asked for."""


@dataclass(frozen=True, slots=True)
class SentBatch:
    """One key press's (or typed prompt's) requests, without the prompt's text: a session keeps these, not `Send`s."""

    label: str
    """The preset's name ("short 200", "8 at once") or "typed"."""
    concurrency: int
    prompt_tokens: int | None
    max_tokens: int
    sent_unix: float

    @classmethod
    def of(cls, send: Send, sent_unix: float) -> SentBatch:
        return cls(send.label, send.concurrency, send.prompt_tokens, send.max_tokens, sent_unix)


def tally(batches: Iterable[SentBatch]) -> dict[str, dict[str, Any]]:
    """Each label once, in the order first sent: how many sends and the sizes of its first."""
    sent: dict[str, dict[str, Any]] = {}
    for batch in batches:
        entry = sent.setdefault(batch.label, {"sends": 0, "concurrency": batch.concurrency,
                                              "prompt_tokens": batch.prompt_tokens, "max_tokens": batch.max_tokens})
        entry["sends"] += 1
    return sent


def sent_of(params: dict[str, Any]) -> dict[str, Any] | None:
    """A run's tally, or None where it kept none (not a UI session, or one an older phasetop saved)."""
    sent = params.get(SENT_PARAM)
    return sent if isinstance(sent, dict) else None


def sent_text(sent: dict[str, Any]) -> str:
    """"short 200 ×3 + 8 at once ×1 + typed ×2"; "nothing" for a session that sent nothing."""
    return " + ".join(f"{label} ×{entry.get('sends')}" for label, entry in sent.items()) or "nothing"


def sent_settings(before: dict[str, Any] | None, after: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two tallies as settings compare's workload diff takes key by key: "<label> sends" on both sides (0 where one
    never sent it: "short 200 sends 3 → 0") and, for a label both sent, its sizes ("8 at once concurrency 8 → 16").
    One side without a tally: "sent", the other side's sends in words."""
    if before is None or after is None:
        return _in_words(before), _in_words(after)
    x, y = {}, {}
    for label in before.keys() | after.keys():
        x[f"{label} sends"] = _sends(before.get(label))
        y[f"{label} sends"] = _sends(after.get(label))
        if label in before and label in after:
            for size in SIZES:
                x[f"{label} {size}"], y[f"{label} {size}"] = before[label].get(size), after[label].get(size)
    return x, y


def _in_words(sent: dict[str, Any] | None) -> dict[str, Any]:
    return {} if sent is None else {SENT_PARAM: sent_text(sent)}


def _sends(entry: dict[str, Any] | None) -> int:
    return 0 if entry is None else entry.get("sends") or 0
