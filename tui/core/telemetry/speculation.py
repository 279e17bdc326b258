"""Speculative decoding as the server counts it: how many drafted tokens the target model accepted, and where.

A speculating server proposes K tokens per sequence per step (an n-gram lookup, a draft model) and verifies them in
one forward pass of the target model; the accepted prefix and one token of the target's own come out together.
vLLM counts `spec_decode_num_drafts` (one per sequence per verifying step), `…num_draft_tokens` (K each),
`…num_accepted_tokens` and `…num_accepted_tokens_per_pos{position}`; llama.cpp counts the first three under its
own prefix. From them: the acceptance rate (accepted / drafted), the mean accepted length (1 + accepted / drafts:
the tokens one step gives a sequence, the factor decode's ceiling is multiplied by) and each position's rate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DRAFTS = "spec_drafts_total"
DRAFT_TOKENS = "spec_draft_tokens_total"
ACCEPTED = "spec_accepted_tokens_total"
POSITION_PREFIX = "spec_accepted_pos_"
"""Per-position counters are read as `spec_accepted_pos_<i>_total`."""


def position_counter(position: str) -> str:
    return f"{POSITION_PREFIX}{position}_total"


@dataclass(frozen=True, slots=True)
class Speculation:
    """Drafts, drafted and accepted tokens over a span (`over`: "window" or "since start")."""

    drafts: float
    draft_tokens: float
    accepted: float
    accepted_per_position: tuple[float, ...] = ()
    over: str = "window"

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted / self.draft_tokens if self.draft_tokens > 0 else None

    @property
    def mean_accepted_length(self) -> float | None:
        """Tokens a verifying step gives a sequence: the accepted drafts and the target's own one."""
        return 1 + self.accepted / self.drafts if self.drafts > 0 else None

    @property
    def proposed_per_draft(self) -> float | None:
        """K: tokens drafted a step."""
        return self.draft_tokens / self.drafts if self.drafts > 0 else None

    @property
    def position_rates(self) -> tuple[float, ...]:
        """Each position's share of drafts accepted there (position 0 first): falls with the position."""
        return tuple(a / self.drafts for a in self.accepted_per_position) if self.drafts > 0 else ()

    def parts(self) -> list[str]:
        """Its figures for a person, each whole: ["speculating 3 a step", "62% accepted", "2.90 tokens a step",
        "by position 81 64 44 %"], the last naming the span when it is not the window."""
        rate, length, k = self.acceptance_rate, self.mean_accepted_length, self.proposed_per_draft
        if rate is None or length is None or k is None:
            return ["speculating: no drafts yet"]
        parts = [f"speculating {k:.0f} a step", f"{rate:.0%} accepted", f"{length:.2f} tokens a step"]
        if self.position_rates:
            parts.append("by position " + " ".join(f"{r:.0%}".removesuffix("%") for r in self.position_rates) + " %")
        if self.over != "window":
            parts[-1] += f" ({self.over})"
        return parts

    def line(self) -> str:
        return ", ".join(self.parts())

    def to_json(self) -> dict[str, Any]:
        return {"drafts": self.drafts, "draft_tokens": self.draft_tokens, "accepted_tokens": self.accepted,
                "accepted_per_position": list(self.accepted_per_position), "over": self.over,
                "acceptance_rate": self.acceptance_rate, "mean_accepted_length": self.mean_accepted_length,
                "num_speculative_tokens": self.proposed_per_draft, "position_rates": list(self.position_rates)}


def speculation_of(before: Mapping[str, float], now: Mapping[str, float]) -> Speculation | None:
    """The window's speculation (`now` − `before`, counters of one process); the totals since start when the window
    drafted nothing (an idle server still says how it speculated); None for a server that has never drafted (llama.cpp
    exports the counters at 0 when it does not speculate)."""
    if not now.get(DRAFTS):
        return None
    positions = sorted((int(name[len(POSITION_PREFIX):-len("_total")]), name) for name in now
                       if name.startswith(POSITION_PREFIX))
    window = {name: now[name] - before.get(name, 0.0) for name in (DRAFTS, DRAFT_TOKENS, ACCEPTED, *(n for _, n in positions))
              if name in now}
    if before and window.get(DRAFTS, 0.0) > 0:
        chosen, over = window, "window"
    else:
        chosen, over = dict(now), "since start"
    return Speculation(chosen.get(DRAFTS, 0.0), chosen.get(DRAFT_TOKENS, 0.0), chosen.get(ACCEPTED, 0.0),
                       tuple(chosen.get(name, 0.0) for _, name in positions), over)


def ceiling_text(ceiling_tok_s: float, factor: float | None) -> str:
    """"ceiling 209 tok/s", or for a speculating server "ceiling 209 × 2.80 tokens a step = 585 tok/s"."""
    if not factor:
        return f"ceiling {ceiling_tok_s:,.0f} tok/s"
    return f"ceiling {ceiling_tok_s / factor:,.0f} × {factor:.2f} tokens a step = {ceiling_tok_s:,.0f} tok/s"
