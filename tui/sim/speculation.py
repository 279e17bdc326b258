"""Speculative decoding in the simulated engine: K drafted tokens verified in one pass of the target model.

Each step, every decoding sequence (not one prefilling a chunk: its first token is one token, as without speculation)
computes its next token and the K tokens a proposer drafted, in the same forward pass: FLOPs for K + 1 tokens, the
weights read once for the whole batch, each sequence's KV cache read once and written for K + 1 tokens; the K + 1
count against --max-num-batched-tokens, and the drafts are cut to what the budget leaves, as vLLM's scheduler cuts
them. The target accepts the drafts' longest prefix it agrees with (position i with chance `acceptance[i]`, given
every one before it was accepted, drawn from a generator seeded by the prompt so runs reproduce) and adds one token of
its own, so a step gives a sequence 1 to K + 1 tokens, cut at max_tokens, sent in one chunk. Rejected drafts' KV is
dropped. Hence the known result: at batch 1 the step is bound by reading the weights, so verifying K + 1 tokens costs
about what one does and the decode rate rises by the mean accepted length, (1 − A^(K+1)) / (1 − A) for a flat A; as
the batch grows the step's FLOPs, K + 1 times decode's, reach the compute roof, every rejected draft is compute spent
for nothing, and past there speculation loses.

An n-gram proposer (`ngram`) looks the drafts up in the prompt on the host: no device time. A draft model (`draft`)
runs K passes of its own over the same batch, one token a sequence each, before the verification; each pass is timed
by the same roofline as the target's (max(memory, compute) + the step overhead), over weights `DRAFT_WEIGHT_SHARE`
of the target's (`draft_passes`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

METHODS = ("ngram", "draft")
DEFAULT_SPECULATIVE_TOKENS = 3
DEFAULT_ACCEPTANCE = 0.7
"""Each position's acceptance without --acceptance or --acceptance-curve (2.53 tokens a verifying step at K = 3)."""
DRAFT_WEIGHT_SHARE = 0.1
"""A draft model's weights against its target's. Drafts share the target's tokenizer, so they come from its family:
Llama 3.2 1B for Llama 3.1 8B is 0.15, Qwen2.5 0.5B for Qwen2.5 7B is 0.07; a tenth sits between. Its KV cache and
attention are left out: small beside its weights at decode batch sizes."""


class SpeculationError(ValueError):
    """Speculation cannot run with these settings (one line, as vLLM's argument errors)."""


@dataclass(frozen=True, slots=True)
class Speculation:
    """How the engine speculates: the proposer, K drafts a step, and each position's acceptance."""

    method: str
    acceptance: tuple[float, ...]
    """Chance position i is accepted, given positions before it were; its length is K."""

    @property
    def k(self) -> int:
        return len(self.acceptance)

    @property
    def mean_accepted_length(self) -> float:
        """Tokens a step gives a sequence on average: 1 + Σ over i of the chance the first i + 1 drafts are accepted."""
        length, reached = 1.0, 1.0
        for chance in self.acceptance:
            reached *= chance
            length += reached
        return length

    def accepted(self, rng: random.Random, drafts: int) -> int:
        """How many of `drafts` drafted tokens the target accepts this step (a prefix: the first rejection ends it)."""
        for position in range(drafts):
            if rng.random() >= self.acceptance[position]:
                return position
        return drafts

    def sim_info(self) -> dict[str, str]:
        return {"speculative": self.method, "num_speculative_tokens": str(self.k),
                "acceptance": ",".join(f"{a:g}" for a in self.acceptance)}


@dataclass
class Verified:
    """The engine's speculation counters, as vLLM counts them (`vllm:spec_decode_*`)."""

    drafts: int = 0
    """Verifying steps, one per sequence per step."""
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_per_position: list[int] = field(default_factory=list)

    def step(self, speculation: Speculation, rng: random.Random, drafts: int) -> int:
        """One sequence's verifying step of `drafts` drafted tokens: counted, and the tokens it gives (the accepted
        drafts and the target's own one)."""
        accepted = speculation.accepted(rng, drafts)
        self.drafts += 1
        self.draft_tokens += drafts
        self.accepted_tokens += accepted
        if len(self.accepted_per_position) < speculation.k:
            self.accepted_per_position += [0] * (speculation.k - len(self.accepted_per_position))
        for position in range(accepted):
            self.accepted_per_position[position] += 1
        return accepted + 1


def speculation_of(method: str, k: int, acceptance: float | None = None,
                   curve: tuple[float, ...] | None = None) -> Speculation:
    """The settings `phasetop sim --speculative METHOD --num-speculative-tokens K [--acceptance A | --acceptance-curve
    a0,a1,…]` give; SpeculationError for ones that cannot run."""
    if method not in METHODS:
        raise SpeculationError(f"--speculative must be one of {', '.join(METHODS)}, got {method!r}")
    if k < 1:
        raise SpeculationError(f"--num-speculative-tokens must be at least 1, got {k}")
    if curve is not None and acceptance is not None:
        raise SpeculationError("give --acceptance or --acceptance-curve, not both")
    chances = curve if curve is not None else (DEFAULT_ACCEPTANCE if acceptance is None else acceptance,) * k
    if len(chances) != k:
        raise SpeculationError(f"--acceptance-curve has {len(chances)} values for {k} speculative tokens")
    for chance in chances:
        if not 0 <= chance <= 1:  # NaN too
            raise SpeculationError(f"acceptance must be between 0 and 1, got {chance:g}")
    return Speculation(method, tuple(chances))


def draft_passes(speculation: Speculation, weight_bytes: float, params: float, drafting: int) -> tuple[int, float, float]:
    """The draft model's passes before a step verifies `drafting` sequences: (passes, bytes each reads, FLOPs each
    computes); no passes for an n-gram proposer."""
    if speculation.method != "draft" or not drafting:
        return 0, 0.0, 0.0
    return speculation.k, DRAFT_WEIGHT_SHARE * weight_bytes, DRAFT_WEIGHT_SHARE * 2 * params * drafting


def draft_rng(prompt_ids: tuple[int, ...]) -> random.Random:
    """A sequence's own draw of acceptances, seeded by its prompt: the same request accepts the same way each run."""
    return random.Random(hash(prompt_ids) & 0xFFFF_FFFF)
