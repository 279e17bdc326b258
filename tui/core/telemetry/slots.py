"""llama.cpp's `/slots`: what each slot (one concurrent request's place, with its share of the KV cache) is doing."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class SlotState:
    """One slot of llama-server at one moment."""

    id: int
    state: str
    """"processing" or "idle"."""
    n_ctx: int | None = None
    """Context tokens this slot may hold."""
    id_task: int | None = None
    n_prompt_tokens: int | None = None
    """Despite the name, the tokens in the slot's context: its prompt plus what it has generated so far."""
    n_prompt_tokens_cache: int | None = None
    """Prompt tokens of its current (or last) request reused from the cache."""
    n_prompt_tokens_processed: int | None = None
    """Prompt tokens it computed; with the cached ones, the whole prompt."""
    n_decoded: int | None = None
    """Tokens generated so far for its current (or last) request."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def read_slots(body: object) -> list[SlotState] | None:
    """The slots in a `/slots` answer, or None when the body is not a list of slots (an error, another server)."""
    if not isinstance(body, list) or not all(isinstance(s, dict) and isinstance(s.get("id"), int) for s in body):
        return None
    return [_slot(s) for s in body]


def _slot(raw: dict[str, Any]) -> SlotState:
    next_token = raw.get("next_token")
    # A list of one dict per sequence in current builds, a dict in older ones.
    first = next_token[0] if isinstance(next_token, list) and next_token else next_token
    decoded = first.get("n_decoded") if isinstance(first, dict) else None
    processing = raw.get("is_processing")
    if processing is None:  # older builds: state 0 idle, 1 processing
        processing = raw.get("state") not in (None, 0)
    return SlotState(
        id=raw["id"],
        state="processing" if processing else "idle",
        n_ctx=_int(raw.get("n_ctx")),
        id_task=_int(raw.get("id_task")),
        n_prompt_tokens=_int(raw.get("n_prompt_tokens")),
        n_prompt_tokens_cache=_int(raw.get("n_prompt_tokens_cache")),
        n_prompt_tokens_processed=_int(raw.get("n_prompt_tokens_processed")),
        n_decoded=_int(decoded),
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def slots_line(slots: list[SlotState]) -> str:
    """One line for a person: how many slots work, and what each busy one holds."""
    busy = [s for s in slots if s.state == "processing"]
    line = f"slots {len(busy)} of {len(slots)} processing"
    details = [
        f"#{s.id} prompt {(s.n_prompt_tokens_cache or 0) + (s.n_prompt_tokens_processed or 0)}"
        f" ({s.n_prompt_tokens_cache or 0} cached), {s.n_decoded if s.n_decoded is not None else '?'} generated"
        for s in busy
    ]
    return line + (": " + "; ".join(details) if details else "")
