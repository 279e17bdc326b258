"""The domain text's experiments: what each one runs (its values, tokens, repeats, fitted to the server's context).

Pure: the drivers in `tui.sources.workloads.experiments` run a plan; `tui.core.experiments.rows` turns its timings into
rows, `tui.core.experiments.findings` the rows into the one-line finding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

EXPERIMENT_NAMES = {"prompt-tokens": "prompt-length sweep", "prefix": "prefix cache", "concurrency": "concurrency sweep",
                    "interference": "long-prompt interference", "context": "context growth",
                    "disaggregation": "disaggregation", "speculation": "speculative decoding"}
"""What each experiment is called where a person reads of it (toasts, the flag editor's reruns)."""

EXPERIMENTS = ("prompt-tokens", "prefix", "concurrency", "interference", "context", "disaggregation", "speculation")
"""What `--vary` names, in the order the domain text tells them."""
OWN_SIMULATORS = ("disaggregation", "speculation")
"""Experiments that start phasetop's simulator in each of their server setups rather than run against one server
(`tui.sources.workloads.disaggregation`, `tui.sources.workloads.speculation`)."""

MAX_VALUES = 32
MAX_REPEAT = 50
MAX_STREAMS = 256
"""make_client pools 256 connections: one per stream."""

BACKGROUND_PROMPT_TOKENS = 200
"""Prompt length of each stream in the concurrency and interference experiments."""
INTERFERENCE_STREAMS = 8
"""Streams decoding when the long prompt lands."""
INTERFERENCE_LEAD_TOKENS = 32
"""Tokens every running stream has before the long prompt is sent: the "before" ITL."""
PREFIX_TAIL_WORDS = 16
"""A unique question after the shared prefix, so no two requests are the same prompt."""
PREFIX_TAIL_TOKENS = 48
"""What the tail may cost: its words at up to 2 tokens each (a coarse tokenizer's rate), and its nonce's 14 characters."""
CONTEXT_PROMPT_TOKENS = 32
"""The context experiment starts from a short prompt: the context grows by generation."""
CONTEXT_WINDOW = 256
"""ITL at position p is read over the gaps of the tokens at positions (p − window, p]."""
CONTEXT_FLOOR = CONTEXT_PROMPT_TOKENS + CONTEXT_WINDOW
"""The first position with a whole window of gaps behind it."""
FIT_MARGIN_SHARE = 1 / 32
FIT_MARGIN_MIN_TOKENS = 32
"""Of the server's max_model_len, this share (at least this many tokens) is kept free: a prompt fitted by the
server's tokenizer may come out a few tokens off, one estimated without it off by a share of its length."""


@dataclass(frozen=True, slots=True)
class Plan:
    """One experiment to run: what varies, over which values, tokens generated per request, repeats per value."""

    vary: str
    values: tuple[int, ...]
    """Prompt tokens, prefix tokens, streams, long-prompt tokens, or token positions (context)."""
    max_tokens: int
    """Tokens each request generates; for context, the generation's length (to the largest position)."""
    repeat: int = 1
    scaled: tuple[str, ...] = ()
    """What was scaled down to fit the server's max_model_len, one note each ("prefix tokens 4,000 → 3,900 …")."""
    slos: tuple[float | None, float | None] = (None, None)
    """Disaggregation: the TTFT and worst gap (seconds) its setups are judged by, where given."""

    def to_json(self) -> dict[str, Any]:
        slos = dict(zip(("slo_ttft_s", "slo_itl_s"), self.slos, strict=True)) if any(v is not None for v in self.slos) else {}
        return {"vary": self.vary, "values": list(self.values), "max_tokens": self.max_tokens, "repeat": self.repeat, **slos}

    @property
    def streams(self) -> int:
        """The most requests it has in flight at once."""
        if self.vary in ("concurrency", "speculation"):
            return max(self.values)
        if self.vary in ("interference", "disaggregation"):
            return INTERFERENCE_STREAMS + 1
        return 1


DEFAULT_VALUES = {
    "prompt-tokens": (200, 500, 1000, 2000),
    "prefix": (1000, 2000, 4000),
    "concurrency": (1, 2, 4, 8, 16, 32),
    "interference": (4000,),
    "context": (1000, 2000, 4000, 8000),
    "disaggregation": (4000,),
    "speculation": (1, 8, 32, 128),
}
DEFAULT_MAX_TOKENS = {"prompt-tokens": 64, "prefix": 8, "concurrency": 256, "interference": 256, "disaggregation": 256,
                      "speculation": 128}
DEFAULT_REPEAT = {"prompt-tokens": 3, "prefix": 3, "concurrency": 1, "interference": 1, "context": 1, "disaggregation": 1,
                  "speculation": 2}
MIN_MAX_TOKENS = {"prompt-tokens": 2, "prefix": 1, "concurrency": 2, "interference": 2 * INTERFERENCE_LEAD_TOKENS,
                  "disaggregation": 2 * INTERFERENCE_LEAD_TOKENS, "speculation": 2}


def make_plan(
    vary: str,
    values: Sequence[int] | None = None,
    max_tokens: int | None = None,
    repeat: int | None = None,
    max_model_len: int | None = None,
) -> Plan:
    """The plan with defaults filled in, values sorted; ValueError (one line) for input that cannot run.

    With the server's `max_model_len` known, every request must fit it less a margin (`fit_margin`):
    defaults that do not fit are scaled down, and say so in `Plan.scaled`; values or max-tokens the
    caller gave that do not fit are refused, so nothing is sent that the server would reject.
    """
    if vary not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {vary!r}: choose one of {', '.join(EXPERIMENTS)}")
    chosen = tuple(sorted(set(values))) if values is not None else DEFAULT_VALUES[vary]
    if not chosen:
        raise ValueError("give at least one value")
    if len(chosen) > MAX_VALUES:
        raise ValueError(f"at most {MAX_VALUES} values")
    if chosen[0] < 1:
        raise ValueError(f"values must be at least 1, got {chosen[0]}")
    repeat = DEFAULT_REPEAT[vary] if repeat is None else repeat
    if not 1 <= repeat <= MAX_REPEAT:
        raise ValueError(f"repeat must be 1 to {MAX_REPEAT}, got {repeat}")
    if vary == "context" and max_tokens is not None:
        raise ValueError("max-tokens does not apply to context: the generation runs to the largest value")
    if vary == "context" and chosen[0] < CONTEXT_FLOOR:
        raise ValueError(f"context positions must be at least {CONTEXT_FLOOR} (a {CONTEXT_PROMPT_TOKENS}-token prompt, then a {CONTEXT_WINDOW}-token window)")
    tokens = None if vary == "context" else DEFAULT_MAX_TOKENS[vary] if max_tokens is None else max_tokens
    if tokens is not None and tokens < MIN_MAX_TOKENS[vary]:
        raise ValueError(f"max-tokens must be at least {MIN_MAX_TOKENS[vary]} for {vary}, got {tokens}")
    if vary in ("concurrency", "speculation") and chosen[-1] > MAX_STREAMS:
        raise ValueError(f"at most {MAX_STREAMS} streams, got {chosen[-1]}")
    scaled: list[str] = []
    if max_model_len is not None:
        fits = f"to fit max_model_len {max_model_len:,} ({fit_margin(max_model_len):,} tokens kept free)"
        budget = max_model_len - fit_margin(max_model_len)
        if tokens is not None and vary in ("concurrency", "interference", "disaggregation", "speculation"):
            tokens = _fit_stream_tokens(vary, tokens, max_tokens is not None, budget, fits, scaled)
        chosen = _fit_values(vary, chosen, tokens, values is not None, budget, fits, scaled)
    if vary == "context":
        tokens = chosen[-1] - CONTEXT_PROMPT_TOKENS + 1
    assert tokens is not None  # the default or the flag, for every experiment but context
    return Plan(vary, chosen, tokens, repeat, tuple(scaled))


def fit_margin(max_model_len: int) -> int:
    """Tokens of the server's context length a plan leaves free (see FIT_MARGIN_SHARE)."""
    return max(FIT_MARGIN_MIN_TOKENS, math.ceil(max_model_len * FIT_MARGIN_SHARE))


VALUE_LABELS = {"prompt-tokens": "prompt tokens", "prefix": "prefix tokens", "interference": "long prompt tokens",
                "context": "positions", "disaggregation": "long prompt tokens"}
"""What a value is, for the notes; concurrency's values are streams, which no context length limits."""


def _fit_stream_tokens(vary: str, max_tokens: int, given: bool, budget: int, fits: str, scaled: list[str]) -> int:
    """Max-tokens of the running streams (a short prompt each), scaled down when the default does not fit."""
    room = budget - BACKGROUND_PROMPT_TOKENS
    if max_tokens <= room:
        return max_tokens
    if given or room < MIN_MAX_TOKENS[vary]:
        floor = f", and {vary} needs at least {MIN_MAX_TOKENS[vary]}" if room < MIN_MAX_TOKENS[vary] else ""
        raise ValueError(f"max-tokens {max_tokens:,} cannot fit after a {BACKGROUND_PROMPT_TOKENS}-token prompt: "
                         f"at most {max(room, 0):,} {fits}{floor}")
    scaled.append(f"max-tokens {max_tokens:,} → {room:,} {fits}")
    return room


def _fit_values(vary: str, values: tuple[int, ...], max_tokens: int | None, given: bool, budget: int, fits: str,
                scaled: list[str]) -> tuple[int, ...]:
    """The values whose longest request fits `budget`: defaults above it come down to it, given ones are refused."""
    if vary not in VALUE_LABELS:
        return values
    if vary in ("prompt-tokens", "prefix"):
        assert max_tokens is not None  # only context's plan has none
        largest = budget - max_tokens - (PREFIX_TAIL_TOKENS if vary == "prefix" else 0)
    else:  # interference, disaggregation: the long prompt asks for one token; context: p takes p − prompt + 1 tokens
        largest = budget - 1
    over = [v for v in values if v > largest]
    if not over:
        return values
    label, least = VALUE_LABELS[vary], CONTEXT_FLOOR if vary == "context" else 1
    top = _two_figures(largest) if largest > 0 else 0
    if given or top < least:
        extra = f" with max-tokens {max_tokens:,}" if vary in ("prompt-tokens", "prefix") else ""
        floor = f", and {vary} needs at least {least:,}" if top < least else ""
        raise ValueError(f"{label} {_listed(over)} cannot fit: at most {max(largest, 0):,}{extra} {fits}{floor}")
    scaled.append(f"{label} {_listed(over)} → {top:,} {fits}")
    return tuple(sorted({min(v, top) for v in values}))


def _two_figures(n: int) -> int:
    """`n` rounded down to two significant figures (3,967 → 3,900): a fitted value that reads as a plain number."""
    step = int(10 ** max(len(str(n)) - 2, 0))
    return n - n % step


def _listed(values: Sequence[int]) -> str:
    return ", ".join(f"{v:,}" for v in values)
