"""The simulated engine: a vLLM-V1-like scheduler over a KV block pool, timed by the roofline (`step_cost`), with
speculative decoding's verification when its settings ask (`speculation`).

Pure: no IO, no clock. The driver calls `schedule(now)` at the start of a step, waits
`plan.duration_s`, then calls `complete(plan, end)`. Times are whatever clock the caller uses.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from tui.sim.blocks import BLOCK_SIZE, BlockPool, block_hashes
from tui.sim.speculation import Verified, draft_rng
from tui.sim.step_cost import EngineConfig, step_time_s


@dataclass(eq=False, slots=True)
class Sequence:
    """One request inside the engine."""

    request_id: str
    prompt_ids: tuple[int, ...]
    max_tokens: int
    arrival: float
    output_tokens: int = 0
    computed: int = 0
    """Tokens whose KV is in the cache (prompt, then generated); reset to 0 on preemption."""
    blocks: list[int] = field(default_factory=list)
    registered_blocks: int = 0
    """Leading prompt blocks already entered in the prefix cache."""
    cached_tokens: int | None = None
    """Prompt tokens the prefix cache supplied when first scheduled (None until then)."""
    scheduled_at: float | None = None
    first_token_at: float | None = None
    last_token_at: float | None = None
    preemptions: int = 0
    finished: bool = False
    finish_reason: str = "length"
    """What the answer reports when max_tokens is reached: "length", or "stop" for a natural end."""
    hashes: tuple[int, ...] = ()
    external_tokens: int = 0
    """Prompt tokens whose KV a prefill worker computed and this (decode) worker pulls; 0 for a local prefill."""
    kv_transfer_bytes: int | None = None
    kv_transfer_s: float | None = None
    """The pull's bytes, and its seconds on the caller's clock as the other stamps (time scale applied); None
    without one."""
    drafts: random.Random | None = None
    """Its draw of speculative acceptances (`speculation.draft_rng`), made at its first verifying step."""

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt_ids)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens


class Scheduled(NamedTuple):
    """One sequence's share of a step (a named tuple: one is made per sequence per step)."""

    sequence: Sequence
    new_tokens: int
    context_before: int
    drafts: int = 0
    """Of `new_tokens`, the drafted ones this step verifies (speculation); 0 for a plain step."""


@dataclass(frozen=True, slots=True)
class StepPlan:
    """What one step computes and how long it takes."""

    start: float
    items: tuple[Scheduled, ...]
    duration_s: float
    preempted: tuple[Sequence, ...] = ()
    pulls: tuple[Sequence, ...] = ()
    """Sequences whose blocks this step reserved for a KV transfer: the driver starts their pulls."""

    @property
    def num_tokens(self) -> int:
        return sum(item.new_tokens for item in self.items)


class TokenOut(NamedTuple):
    """A sequence sampled a token at the end of a step; `index` counts from 0.

    A named tuple, not a frozen dataclass: one is made per token, and a frozen dataclass's
    `__init__` costs about three times as much (it sets each field through `object.__setattr__`).
    """

    sequence: Sequence
    index: int
    finished: bool
    gap: float | None = None
    """Time since this sequence's previous token (an ITL sample); None for the first."""


@dataclass
class Counters:
    """Cumulative engine counters, as vLLM's Prometheus counters count them (tokens, not blocks)."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    prompt_tokens_computed: int = 0
    """Prompt tokens prefilled here (not from the prefix cache), counted with the first token as vLLM does."""
    prompt_tokens_cached: int = 0
    """Prompt tokens the prefix cache or a KV transfer supplied, counted with the first token."""
    prompt_tokens_external: int = 0
    """Of those, the ones a KV transfer supplied (vLLM's `source="external_kv_transfer"`)."""
    preemptions: int = 0
    speculation: Verified = field(default_factory=Verified)


class Engine:
    """Continuous batching with chunked prefill, a KV block pool, prefix caching and preemption."""

    def __init__(self, config: EngineConfig) -> None:
        config.validate()
        self.config = config
        self.pool = BlockPool(config.num_gpu_blocks, caching=config.enable_prefix_caching)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.receiving: list[Sequence] = []
        """Blocks reserved, KV on its way from a prefill worker (vLLM's WAITING_FOR_REMOTE_KVS)."""
        self.counters = Counters()

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def step_start(self, deadline: float) -> float:
        """When the next step starts: at its deadline (the last one's end), but with nothing running not before the
        first waiting request arrived; a request is never scheduled, nor its first token made, before it came."""
        if not self.running and self.waiting:
            return max(deadline, self.waiting[0].arrival)
        return deadline

    def add(self, sequence: Sequence) -> None:
        if sequence.prompt_tokens + sequence.max_tokens > self.config.model_len:
            raise ValueError("prompt plus max_tokens exceeds max_model_len")
        sequence.hashes = block_hashes(sequence.prompt_ids) if self.config.enable_prefix_caching else ()
        self.waiting.append(sequence)

    def abort(self, sequence: Sequence) -> None:
        """Drop a sequence (client went away) and free its blocks at once."""
        if sequence.finished:
            return
        sequence.finished = True
        if sequence in self.running:
            self.running.remove(sequence)
        elif sequence in self.waiting:
            self.waiting.remove(sequence)
        elif sequence in self.receiving:
            self.receiving.remove(sequence)
        self._free(sequence)

    def receive(self, sequence: Sequence) -> None:
        """Its KV arrived: it waits at the head of the queue with its prompt computed but the last token."""
        if sequence.finished:
            return  # aborted while the KV was on its way
        self.receiving.remove(sequence)
        sequence.computed = sequence.external_tokens
        self.waiting.appendleft(sequence)

    def schedule(self, now: float) -> StepPlan:
        """Pick this step's work: one token per running decode, then prefill chunks, within the budget."""
        budget = self.config.max_num_batched_tokens
        chunked = self.config.enable_chunked_prefill
        running = self.running
        items: list[Scheduled] = []
        preempted: list[Sequence] = []
        pulls: list[Sequence] = []
        speculation = self.config.speculation
        index = 0
        while index < len(running) and budget > 0:  # runs once per sequence per step: kept lean
            sequence = running[index]
            computed = sequence.computed
            left = len(sequence.prompt_ids) + sequence.output_tokens - computed
            new = left if left < budget else budget
            if not chunked and new < left:
                break
            drafts = 0
            if speculation is not None and left == 1 and sequence.output_tokens:  # decoding: K drafts ride along
                drafts = max(0, min(speculation.k, budget - 1, self.config.model_len - 2 - computed))  # vLLM's caps
                new += drafts
            evicted = False
            while computed + new > len(sequence.blocks) * BLOCK_SIZE and not self._reserve(sequence, computed + new):
                victim = self.running.pop()
                self._preempt(victim)
                preempted.append(victim)
                if victim is sequence:
                    evicted = True  # it was the last one left to preempt: it waits now, not in the batch
                    break
            if sequence.finished or evicted:
                continue
            items.append(Scheduled(sequence, new, computed, drafts))
            budget -= new
            index += 1
        if not preempted:
            budget = self._admit(now, budget, items, pulls)
        drafting = sum(1 for item in items if item[3]) if speculation is not None else 0
        duration = step_time_s(self.config, [(item[1], item[2]) for item in items], drafting) if items else 0.0
        return StepPlan(now, tuple(items), duration, tuple(preempted), tuple(pulls))

    def complete(self, plan: StepPlan, end: float) -> list[TokenOut]:
        """Apply a step at its end: advance the KV, sample tokens, finish and free what is done."""
        out: list[TokenOut] = []
        counters = self.counters
        for sequence, new_tokens, context_before, drafts in plan.items:  # once per sequence per step: kept lean
            if sequence.finished or sequence.computed != context_before:
                continue  # aborted or preempted while the step ran
            if drafts:
                emitted = self._verified(sequence, drafts)
                sequence.computed += emitted  # a rejected draft's KV is dropped
            else:
                emitted = 1
                sequence.computed += new_tokens
            if sequence.registered_blocks < len(sequence.hashes):
                self._register_full_blocks(sequence)
            index = sequence.output_tokens
            if sequence.computed < len(sequence.prompt_ids) + index:
                continue  # a prefill chunk that does not end the prompt samples nothing
            gap = None if sequence.last_token_at is None else end - sequence.last_token_at
            if emitted > 1:  # the accepted drafts, then the target's own token: one chunk at the step's end
                out += [TokenOut(sequence, index + extra, False, None if extra else gap) for extra in range(emitted - 1)]
                counters.generation_tokens += emitted - 1
                index += emitted - 1
                gap = None  # the step's one gap went with its first token (vLLM observes ITL once a step)
            sequence.output_tokens = index + 1
            counters.generation_tokens += 1
            if sequence.first_token_at is None:
                sequence.first_token_at = end
                counters.prompt_tokens += sequence.prompt_tokens
                counters.prompt_tokens_cached += sequence.cached_tokens or 0
                counters.prompt_tokens_external += sequence.external_tokens
                counters.prompt_tokens_computed += sequence.prompt_tokens - (sequence.cached_tokens or 0)
            sequence.last_token_at = end
            done = sequence.output_tokens >= sequence.max_tokens
            if done:
                sequence.finished = True
                self.running.remove(sequence)
                self._free(sequence)
            out.append(TokenOut(sequence, index, done, gap))
        return out

    def _verified(self, sequence: Sequence, drafts: int) -> int:
        """Tokens a verifying step gives `sequence` (`Verified.step`), cut at max_tokens as vLLM's stop check cuts
        them (its counters count every accepted draft)."""
        assert self.config.speculation is not None, "only a speculating engine schedules drafts"
        if sequence.drafts is None:
            sequence.drafts = draft_rng(sequence.prompt_ids)
        given = self.counters.speculation.step(self.config.speculation, sequence.drafts, drafts)
        return min(given, sequence.max_tokens - sequence.output_tokens)

    @property
    def kv_cache_usage(self) -> float:
        return self.pool.usage

    def _admit(self, now: float, budget: int, items: list[Scheduled], pulls: list[Sequence]) -> int:
        """Move waiting sequences into the batch while seats, budget and blocks allow (FCFS).

        One whose KV comes from a prefill worker first gets blocks for its whole prompt (it waits, and all
        behind it, until the pool holds them), then waits in `receiving` for the pull; `receive` puts it back
        at the head with those blocks, and it joins the batch to compute its last prompt token.
        """
        while self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs:
            sequence = self.waiting[0]
            if sequence.arrival > now:
                break  # it came after this step began (a step late on the loop starts at its deadline): the next one
            if sequence.external_tokens and not sequence.blocks:
                if not self._reserve(sequence, sequence.prompt_tokens):
                    break
                self.waiting.popleft()
                self.receiving.append(sequence)
                pulls.append(sequence)
                continue
            hit_blocks: list[int] = []
            received = bool(sequence.blocks)  # only a pulled KV waits here holding blocks
            if sequence.computed == 0 and not received:
                hit_blocks = self._lookup_prefix(sequence)
            computed = sequence.computed if received else len(hit_blocks) * BLOCK_SIZE
            remaining = sequence.total_tokens - computed
            if not self.config.enable_chunked_prefill and remaining > budget:
                break
            new = min(remaining, budget)
            if not received:
                self.pool.touch(hit_blocks)
                sequence.blocks = list(hit_blocks)
            if not self._reserve(sequence, computed + new):
                self.pool.free(sequence.blocks)
                sequence.blocks = []
                break
            self.waiting.popleft()
            if sequence.cached_tokens is None:
                sequence.cached_tokens = computed
                self.counters.prefix_cache_queries += sequence.prompt_tokens
                self.counters.prefix_cache_hits += computed - sequence.external_tokens
            if sequence.scheduled_at is None:
                sequence.scheduled_at = now
            sequence.computed = computed
            sequence.registered_blocks = len(hit_blocks)
            self.running.append(sequence)
            items.append(Scheduled(sequence, new, computed))
            budget -= new
        return budget

    def _lookup_prefix(self, sequence: Sequence) -> list[int]:
        """Cached blocks of the longest shared prefix; the last prompt token is always recomputed."""
        if not self.config.enable_prefix_caching:
            return []
        usable = (sequence.prompt_tokens - 1) // BLOCK_SIZE
        return self.pool.lookup(sequence.hashes[:usable])

    def _reserve(self, sequence: Sequence, tokens: int) -> bool:
        need = math.ceil(tokens / BLOCK_SIZE) - len(sequence.blocks)
        if need <= 0:
            return True
        if need > self.pool.num_free:
            return False
        sequence.blocks.extend(self.pool.allocate(need))
        return True

    def _preempt(self, sequence: Sequence) -> None:
        """Preemption by recompute: drop the KV, requeue at the front, keep the tokens already sent."""
        self._free(sequence)
        sequence.computed = 0
        sequence.external_tokens = 0  # its pulled KV is gone: it prefills here, as vLLM recomputes
        sequence.registered_blocks = 0
        sequence.preemptions += 1
        self.counters.preemptions += 1
        self.waiting.appendleft(sequence)

    def _free(self, sequence: Sequence) -> None:
        self.pool.free(sequence.blocks)
        sequence.blocks = []

    def _register_full_blocks(self, sequence: Sequence) -> None:
        full = min(sequence.computed, sequence.prompt_tokens) // BLOCK_SIZE
        for i in range(sequence.registered_blocks, min(full, len(sequence.hashes))):
            self.pool.register(sequence.blocks[i], sequence.hashes[i])
        sequence.registered_blocks = max(sequence.registered_blocks, full)
