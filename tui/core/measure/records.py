"""What one request measured, and the phase figures SPEC defines on it.

Definitions match `vllm bench serve` 0.33: TTFT is the first chunk carrying a token after the request was
written; E2E is the last; TPOT = (E2E − TTFT) / (output tokens − 1). ITL is per token, where `vllm bench serve`'s
is per chunk: a chunk is not a token (it may carry several, `chunk_tokens`), so a chunk carrying k tokens gives k
gaps of its gap / k, and the per-chunk gaps are kept apart as `chunk_gaps_s`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from itertools import pairwise
from typing import Any

from tui.core.measure.chunk_tokens import per_token_gaps, token_ends
from tui.core.measure.stats import summarize


@dataclass(frozen=True, slots=True)
class ServerSplit:
    """The phase split as the server itself reported it (Ollama counters, llama.cpp timings, vLLM metrics)."""

    prefill_s: float | None = None
    decode_s: float | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    load_s: float | None = None
    cached_tokens: int | None = None
    cached_from_metrics: bool = False
    """True when `cached_tokens` is the growth of the server's cache-hit counter around this request (vLLM's
    `prompt_tokens_cached_total`; usage carries its own count only with --enable-prompt-tokens-details)."""
    queue_s: float | None = None
    """Time the request waited to be scheduled (vLLM's queue_time_ms); None where the server does not say."""
    prefill_includes_first_step: bool = False
    """True when `prefill_s` runs to the first token, the step that made it included (vLLM's TTFT);
    False when it is the prompt's evaluation alone (llama.cpp's prompt_ms, Ollama's prompt_eval_duration)."""
    decode_spans_first_token: bool = False
    """True when `decode_s` covers every output token (Ollama's eval_duration); False when it runs from the
    first token to the last (vLLM's generation_time_ms, llama.cpp's predicted_ms): n − 1 gaps for n tokens."""
    kv_transfer_s: float | None = None
    """The KV cache's move from a prefill worker to a decode worker, inside `prefill_s` (a disaggregated server's
    `kv_transfer_time_ms`); None where the server moved none or does not say."""
    kv_transfer_bytes: int | None = None
    """The bytes that move carried (`kv_transfer_bytes`)."""

    @property
    def prefill_tok_s(self) -> float | None:
        if self.prompt_tokens and self.prefill_s:
            return self.prompt_tokens / self.prefill_s
        return None

    @property
    def decode_tok_s(self) -> float | None:
        """Tokens per second of decode, counted as the client counts it: gaps covered over the time they took."""
        if not self.output_tokens or not self.decode_s:
            return None
        gaps = self.output_tokens if self.decode_spans_first_token else self.output_tokens - 1
        return gaps / self.decode_s if gaps > 0 else None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def with_cached_from_metrics(timing: "RequestTiming", cached_tokens: int | None) -> "RequestTiming":
    """The timing with the cached-token count of the server's counters, where its reply carried none."""
    split = timing.server_split or ServerSplit()
    if cached_tokens is None or split.cached_tokens is not None:
        return timing
    return replace(timing, server_split=replace(split, cached_tokens=cached_tokens, cached_from_metrics=True))


@dataclass(frozen=True, slots=True)
class RequestTiming:
    """One streamed request: when it was written and when each content chunk arrived.

    Offsets are from `perf_counter_ns` in the reading loop, relative to the moment the request
    body was on the wire; `t_sent_unix` is that moment on the wall clock.
    """

    ok: bool
    """False when the request failed; the offsets then hold whatever arrived before the failure."""
    t_sent_unix: float
    token_offsets_s: tuple[float, ...] = ()
    """Arrival of each chunk that carried generated tokens (text or not), seconds after the send."""
    connect_s: float | None = None
    """DNS + TCP (+ TLS) before the request was written; never inside TTFT."""
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    """Server's usage count when it gave one, else the client's estimate (see `tokens_estimated`)."""
    tokens_estimated: bool = False
    """True when token counts are the client's estimate, not the server's usage."""
    tokens_per_chunk: tuple[int, ...] | None = None
    """How many tokens each chunk carried, where one carried other than one (the server's per-chunk usage, or a
    token event each); None when each carried one, or when the server did not say (`chunk_tokens` tells)."""
    server_split: ServerSplit | None = None
    error: str | None = None
    cold: bool = False
    """True when this request paid a model load (Ollama `load_duration`, or a TTFT far above the rest)."""
    burst: str | None = None
    """Why its timing is delivery, not generation (chunks came in clumps: `tui.core.measure.delivery`); None when trusted."""
    text: str = field(default="", repr=False)
    """The generated text, untrusted: show as plain text only."""
    client_gaps: tuple[int, ...] = ()
    """The gaps (i: chunk i to i + 1) the client caused, its meter reading late (`tui.core.measure.gaps`): they time the
    meter, not the server, so `itl_s` and `chunk_gaps_s` leave them out."""
    completion_id: str | None = None
    """The server's id of the answer (OpenAI's `id`), untrusted text: its trace span carries it (`tui.core.telemetry.served`)."""

    @property
    def ttft_s(self) -> float | None:
        return self.token_offsets_s[0] if self.token_offsets_s else None

    @property
    def e2e_s(self) -> float | None:
        return self.token_offsets_s[-1] if self.token_offsets_s else None

    @property
    def chunk_tokens(self) -> tuple[int, ...] | None:
        """Tokens each chunk carried; None when the server sent fewer chunks than tokens without saying how many each
        held (then `itl_s` is an estimate: `itl_estimated`)."""
        if self.tokens_per_chunk is not None:
            return self.tokens_per_chunk
        if self.output_tokens is None or self.output_tokens == len(self.token_offsets_s):
            return (1,) * len(self.token_offsets_s)
        return None

    @property
    def itl_estimated(self) -> bool:
        """True when the chunks' tokens are not known one by one: each chunk's gap is then spread over the mean
        tokens a chunk carried."""
        return self.tokens_per_chunk is None and self.output_tokens is not None and len(self.token_offsets_s) > 1 and (
            self.output_tokens != len(self.token_offsets_s))

    @property
    def chunk_gaps_s(self) -> tuple[float, ...]:
        """The gaps between chunks as they were delivered, those the client caused left out."""
        gaps = tuple(b - a for a, b in pairwise(self.token_offsets_s))
        if not self.client_gaps:
            return gaps
        theirs = set(self.client_gaps)
        return tuple(gap for i, gap in enumerate(gaps) if i not in theirs)

    @property
    def itl_s(self) -> tuple[float, ...]:
        """The gap before each token after the first, as the server produced them: a chunk's gap spread over the
        tokens it carried (`per_token_gaps`), those the client caused left out."""
        if self.tokens_per_chunk is None and not self.itl_estimated:
            return self.chunk_gaps_s  # one token a chunk: the common case, without the walk
        return per_token_gaps(self.token_offsets_s, self.chunk_tokens, self.output_tokens, self.client_gaps)

    @property
    def token_ends(self) -> tuple[int, ...] | None:
        """The output-token index (0-based) of each chunk's last token; None when the chunks' tokens are not known."""
        sizes = self.chunk_tokens
        return token_ends(sizes) if sizes is not None else None

    @property
    def mean_tokens_per_chunk(self) -> float | None:
        """Tokens over chunks: 1 for a server that sends a chunk a token, more for one that speculates or streams at
        an interval."""
        if not self.token_offsets_s or not self.output_tokens:
            return None
        return self.output_tokens / len(self.token_offsets_s)

    @property
    def decode_span_s(self) -> float | None:
        """E2E − TTFT: zero when every token came in the first chunk (TPOT 0 then, as vLLM counts it)."""
        if not self.token_offsets_s:
            return None
        return self.token_offsets_s[-1] - self.token_offsets_s[0]

    @property
    def tpot_s(self) -> float | None:
        span = self.decode_span_s
        if span is None or not self.output_tokens or self.output_tokens < 2:
            return None
        return span / (self.output_tokens - 1)

    @property
    def decode_tok_s(self) -> float | None:
        span = self.decode_span_s
        if not span or not self.output_tokens or self.output_tokens < 2:
            return None
        return (self.output_tokens - 1) / span

    @property
    def client_prefill_tok_s(self) -> float | None:
        if not self.prompt_tokens or not self.ttft_s:
            return None
        return self.prompt_tokens / self.ttft_s

    @property
    def prefill_tok_s(self) -> float | None:
        """The server's own prefill rate where it reports one, else prompt tokens / TTFT."""
        server = self.server_split.prefill_tok_s if self.server_split else None
        return server if server is not None else self.client_prefill_tok_s

    @property
    def prefill_source(self) -> str | None:
        """Which prefill rate `prefill_tok_s` shows: "server" or "client"."""
        if self.server_split and self.server_split.prefill_tok_s is not None:
            return "server"
        return "client" if self.client_prefill_tok_s is not None else None

    def to_json(self) -> dict[str, Any]:
        """The request object of SPEC's `probe` JSON."""
        return {
            "ok": self.ok,
            "error": self.error,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "tokens_estimated": self.tokens_estimated,
            "cold": self.cold,
            "burst": self.burst,
            "connect_s": self.connect_s,
            "ttft_s": self.ttft_s,
            "e2e_s": self.e2e_s,
            "tpot_s": self.tpot_s,
            "decode_tok_s": self.decode_tok_s,
            "prefill_tok_s": self.prefill_tok_s,
            "prefill_source": self.prefill_source,
            "itl_s": list(self.itl_s),
            "itl_estimated": self.itl_estimated,
            "chunk_gaps_s": list(self.chunk_gaps_s),
            "tokens_per_chunk": list(sizes) if (sizes := self.chunk_tokens) is not None else None,
            "client_gaps": list(self.client_gaps),
            "t_sent_unix": self.t_sent_unix,
            "token_offsets_s": list(self.token_offsets_s),
            "server_split": self.server_split.to_json() if self.server_split else None,
            "completion_id": self.completion_id,
        }


def same_requests(these: Sequence[RequestTiming], those: Sequence[RequestTiming]) -> bool:
    """The very same request records, in the same order (a record is immutable: a new read makes a new one)."""
    return len(these) == len(those) and all(a is b for a, b in zip(these, those))


def summarize_requests(requests: list[RequestTiming]) -> dict[str, Any]:
    """SPEC's probe summary: mean/p50/p90/p99/n of each figure over the requests that finished and whose
    timing is generation, not delivery (`burst` unset); `bursts_excluded` counts the others.

    ITL pools every token's gap of every request (`vllm bench serve` pools every chunk's: `chunk_gaps_s` here).
    """
    done = [r for r in requests if r.ok and not r.burst]
    return {
        "bursts_excluded": sum(1 for r in requests if r.ok and r.burst),
        "ttft_s": summarize(r.ttft_s for r in done).to_json(),
        "itl_s": summarize(gap for r in done for gap in r.itl_s).to_json(),
        "chunk_gaps_s": summarize(gap for r in done for gap in r.chunk_gaps_s).to_json(),
        "tpot_s": summarize(r.tpot_s for r in done).to_json(),
        "e2e_s": summarize(r.e2e_s for r in done).to_json(),
        "decode_tok_s": summarize(r.decode_tok_s for r in done).to_json(),
        "prefill_tok_s": summarize(r.prefill_tok_s for r in done).to_json(),
    }


def chunking_line(requests: Sequence[RequestTiming]) -> str | None:
    """One line for a person where chunks carried other than one token each: ITL is per token, and the per-chunk
    gaps (`vllm bench serve`'s ITL) beside it; None where every chunk carried one. How the server grouped its tokens is
    read from every answer, one timed as delivery too; the gaps only from those timed as generation."""
    answered = [r for r in requests if r.ok and r.token_offsets_s]
    done = [r for r in answered if not r.burst]
    if any(r.itl_estimated for r in answered):
        return ("ITL is per token, estimated: the server sent fewer chunks than tokens without saying how many each "
                "carried, so each chunk's gap is spread over the mean (ask for usage on every chunk to count them)")
    grouped = [r for r in answered if r.tokens_per_chunk is not None]
    if not grouped:
        return None
    sizes = [size for r in grouped for size in r.tokens_per_chunk or ()]
    gaps = summarize(gap for r in done for gap in r.chunk_gaps_s)
    per_chunk = f"; per chunk (as vllm bench serve counts ITL) p50 {gaps.p50 * 1e3:.2f} ms, p99 {gaps.p99 * 1e3:.2f} ms" if (
        gaps.p50 is not None and gaps.p99 is not None) else ""
    return (f"ITL is per token: chunks carried {sum(sizes) / len(sizes):.2f} tokens on average ({min(sizes)}–{max(sizes)}), "
            f"each chunk's gap spread over its tokens{per_chunk}")


COLD_TTFT_FACTOR = 3.0
COLD_TTFT_EXCESS_S = 0.25
"""A first TTFT this many times the median of the others, and this much longer, reads as a model load.

The absolute excess keeps a first request that merely warmed a connection or a cache (tens of
milliseconds) from being called a model load (seconds)."""


def mark_cold(requests: list[RequestTiming], server_fresh: bool | None = None) -> list[RequestTiming]:
    """Mark the first request `cold` when it paid a start-up cost, not the prompt's: a model load (the server
    said so, or its TTFT stands far above the rest), or the server's cold start.

    `server_fresh` is whether the server had served no generation request before the first of these
    (`tui.sources.identity.server_is_fresh`, read just before it was sent; None when unknown). A fresh
    server's first request pays its warm-up (about 3× the warm TTFT on the simulator, 20 ms against 7),
    far under a model load's threshold, so it is marked whatever its TTFT.
    """
    if not requests:
        return requests
    first, rest = requests[0], requests[1:]
    if server_fresh:
        return [replace(first, cold=True), *rest]
    loaded = bool(first.server_split and first.server_split.load_s and first.server_split.load_s > 0.05)
    rest_ttfts = [r.ttft_s for r in rest if r.ok and r.ttft_s is not None]
    typical = summarize(rest_ttfts).p50
    slow = (
        first.ttft_s is not None
        and typical is not None
        and first.ttft_s > COLD_TTFT_FACTOR * typical
        and first.ttft_s - typical > COLD_TTFT_EXCESS_S
    )
    if loaded or slow:
        return [replace(first, cold=True), *rest]
    return requests
