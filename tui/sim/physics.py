"""The simulated engine: a vLLM-V1-like scheduler over a KV block pool, timed by the roofline.

Pure: no IO, no clock. The driver calls `schedule(now)` at the start of a step, waits
`plan.duration_s`, then calls `complete(plan, end)`. Times are whatever clock the caller uses.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from tui.core.hardware.devices import Device
from tui.core.hardware.models import ModelLayout
from tui.core.hardware.roofline import forward_flops, kv_bytes_per_token, weight_bytes
from tui.sim.blocks import BLOCK_SIZE, BlockPool, block_hashes

MEMORY_EFFICIENCY = 1.0
"""Share of peak bandwidth a step reaches. The domain text's ceiling is the bound, and its claim is a
measured rate within 3 % below it, so the sim streams at the full roofline and loses only the overhead."""
COMPUTE_EFFICIENCY = 0.5
"""Share of peak bf16 FLOPs a step reaches (model FLOPs utilisation): prefill GEMMs on real stacks
reach 40–60 %, so prefill is slower than the compute roofline, as measured servers are."""
STEP_OVERHEAD_S = 40e-6
"""Fixed cost of one engine step (scheduling, kernel launches under CUDA graphs, sampling).
At 16-bit 8B on an H100 this puts one stream at 207.6 tok/s, 0.9 % below the 209.4 ceiling."""


class ConfigError(ValueError):
    """The engine cannot start with these settings (the words say why, as vLLM's would)."""


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Everything the physics needs: the device, the model, and vLLM's scheduler and cache flags."""

    device: Device
    layout: ModelLayout
    bits: int = 16
    kv_bytes_per_element: float = 2
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 256
    gpu_memory_utilization: float = 0.9
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    max_model_len: int | None = None
    """None: the model's own limit."""
    memory_efficiency: float = MEMORY_EFFICIENCY
    compute_efficiency: float = COMPUTE_EFFICIENCY
    step_overhead_s: float = STEP_OVERHEAD_S

    @property
    def model_len(self) -> int:
        return self.max_model_len or self.layout.max_model_len

    @property
    def weight_bytes(self) -> float:
        return weight_bytes(self.layout.params, self.bits)

    @property
    def kv_bytes_per_token(self) -> float:
        return kv_bytes_per_token(self.layout, self.kv_bytes_per_element)

    @property
    def kv_pool_bytes(self) -> float:
        return self.gpu_memory_utilization * self.device.memory_gb * 1e9 - self.weight_bytes

    @property
    def num_gpu_blocks(self) -> int:
        """KV blocks that fit in the memory left after the weights (activations are not modelled)."""
        return max(0, math.floor(self.kv_pool_bytes / (self.kv_bytes_per_token * BLOCK_SIZE)))

    def validate(self) -> None:
        """Refuse what vLLM refuses at startup, in one line each."""
        if self.max_num_batched_tokens < 1 or self.max_num_seqs < 1:
            raise ConfigError("max-num-batched-tokens and max-num-seqs must be at least 1")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(f"gpu-memory-utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.model_len < 1:
            raise ConfigError("max-model-len must be at least 1")
        if self.kv_pool_bytes <= 0:
            raise ConfigError(
                f"the weights ({self.weight_bytes / 1e9:.1f} GB) do not fit in {self.gpu_memory_utilization:g} × "
                f"{self.device.memory_gb:g} GB of {self.device.name}; quantize, or raise --gpu-memory-utilization"
            )
        capacity = self.num_gpu_blocks * BLOCK_SIZE
        if capacity < self.model_len:
            raise ConfigError(
                f"the model's max seq len ({self.model_len}) needs {self.model_len * self.kv_bytes_per_token / 2**30:.2f} GiB "
                f"of KV cache, more than the {capacity * self.kv_bytes_per_token / 2**30:.2f} GiB available; "
                f"lower --max-model-len to {capacity} or raise --gpu-memory-utilization"
            )
        if not self.enable_chunked_prefill and self.max_num_batched_tokens < self.model_len:
            raise ConfigError(
                f"max-num-batched-tokens ({self.max_num_batched_tokens}) is smaller than max-model-len "
                f"({self.model_len}) with chunked prefill off: raise it or lower --max-model-len"
            )


@dataclass(frozen=True, slots=True)
class StepTraffic:
    """What one step moves and computes: the figures vLLM's `--enable-mfu-metrics` estimates."""

    read_bytes: float
    write_bytes: float
    flops: float


def step_traffic(config: EngineConfig, work: list[tuple[int, int]]) -> StepTraffic:
    """Bytes and FLOPs of one step for `(new_tokens, context_before)` per sequence.

    Reads: every weight once, plus each sequence's KV cache so far. Writes: the KV of the new tokens.
    Compute: 2 × params per token plus attention over each token's context (`forward_flops`).
    """
    context_tokens = sum(context for _, context in work)
    new_tokens = sum(new for new, _ in work)
    return StepTraffic(
        read_bytes=config.weight_bytes + config.kv_bytes_per_token * context_tokens,
        write_bytes=config.kv_bytes_per_token * new_tokens,
        flops=sum(forward_flops(config.layout.params, config.layout, new, context) for new, context in work),
    )


def step_time_s(config: EngineConfig, work: list[tuple[int, int]]) -> float:
    """One step's time for `(new_tokens, context_before)` per sequence: max(memory, compute) + overhead."""
    traffic = step_traffic(config, work)
    memory_s = (traffic.read_bytes + traffic.write_bytes) / (config.device.mem_bandwidth_gbs * 1e9 * config.memory_efficiency)
    compute_s = traffic.flops / (config.device.peak_bf16_tflops * 1e12 * config.compute_efficiency)
    return max(memory_s, compute_s) + config.step_overhead_s


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
        index = 0
        while index < len(running) and budget > 0:  # runs once per sequence per step: kept lean
            sequence = running[index]
            computed = sequence.computed
            left = len(sequence.prompt_ids) + sequence.output_tokens - computed
            new = left if left < budget else budget
            if not chunked and new < left:
                break
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
            items.append(Scheduled(sequence, new, computed))
            budget -= new
            index += 1
        if not preempted:
            budget = self._admit(now, budget, items, pulls)
        duration = step_time_s(self.config, [(item[1], item[2]) for item in items]) if items else 0.0
        return StepPlan(now, tuple(items), duration, tuple(preempted), tuple(pulls))

    def complete(self, plan: StepPlan, end: float) -> list[TokenOut]:
        """Apply a step at its end: advance the KV, sample tokens, finish and free what is done."""
        out: list[TokenOut] = []
        counters = self.counters
        for sequence, new_tokens, context_before in plan.items:  # once per sequence per step: kept lean
            if sequence.finished or sequence.computed != context_before:
                continue  # aborted or preempted while the step ran
            sequence.computed += new_tokens
            if sequence.registered_blocks < len(sequence.hashes):
                self._register_full_blocks(sequence)
            index = sequence.output_tokens
            if sequence.computed < len(sequence.prompt_ids) + index:
                continue  # a prefill chunk that does not end the prompt samples nothing
            sequence.output_tokens = index + 1
            counters.generation_tokens += 1
            gap = None if sequence.last_token_at is None else end - sequence.last_token_at
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
