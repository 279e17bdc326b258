"""One request as the client saw it beside the server's own account of it (llama.cpp `timings`, Ollama
counters, vLLM per-request metrics).

The client's TTFT runs from the request on the wire to the first content chunk; the server's prompt
time covers only its prefill. The difference is everything else before the first token: the network
both ways, time queued for a slot, and the step that produced and sent the first token. The two
decode rates differ by how the ends are counted: the client divides (tokens − 1) by the span between
the first and last chunk, llama.cpp divides all generated tokens by its generation time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from tui.core.records import RequestTiming

TTFT_GAP_NAME = "network + queue + first decode step"
"""What client TTFT − server prompt time is made of."""


@dataclass(frozen=True, slots=True)
class Reconciled:
    """Client and server figures of one request, side by side; None where a side gave none."""

    client_ttft_s: float | None
    server_prompt_s: float | None
    ttft_gap_s: float | None
    """client TTFT − server prompt time: `TTFT_GAP_NAME`."""
    client_decode_tok_s: float | None
    server_decode_tok_s: float | None
    decode_ratio: float | None
    """client decode rate / server decode rate (1.0 when they agree)."""
    server_cached_tokens: int | None

    def to_json(self) -> dict:
        return {**asdict(self), "ttft_gap_is": TTFT_GAP_NAME}


def reconcile(timing: RequestTiming) -> Reconciled | None:
    """Both sides of a request that reported its own split; None when the server gave none."""
    split = timing.server_split
    if split is None:
        return None
    client_ttft, server_prompt = timing.ttft_s, split.prefill_s
    client_decode, server_decode = timing.decode_tok_s, split.decode_tok_s
    return Reconciled(
        client_ttft_s=client_ttft,
        server_prompt_s=server_prompt,
        ttft_gap_s=client_ttft - server_prompt if client_ttft is not None and server_prompt is not None else None,
        client_decode_tok_s=client_decode,
        server_decode_tok_s=server_decode,
        decode_ratio=client_decode / server_decode if client_decode and server_decode else None,
        server_cached_tokens=split.cached_tokens,
    )
