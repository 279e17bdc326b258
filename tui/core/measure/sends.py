"""A send: one key's (or one typed prompt's) requests, as the prompt pane makes them and a restart sends again."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Send:
    """One key's requests: `concurrency` of them at once, ids from `first_id`."""

    first_id: int
    label: str
    """The lanes' name ("short 200"; "8 at once 3" for the third of a batch)."""
    text: str | None
    """The typed prompt; None: a filler prompt of `prompt_tokens`."""
    prompt_tokens: int | None
    concurrency: int
    max_tokens: int
    shared_prefix: str | None = None
    """Put before every prompt (the shared-system-prompt preset), so prefix caching can hit."""
