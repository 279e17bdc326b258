"""One request as the client saw it beside the server's own account of it (llama.cpp `timings`, Ollama
counters, vLLM per-request metrics).

The client's TTFT runs from the request on the wire to the first content chunk; the server's prompt
time covers only its prefill. The difference is everything else before the first token: the network
both ways, time queued for a slot, and the step that produced and sent the first token. vLLM's own TTFT
(with --enable-per-request-metrics) already holds the first step and gives its queue time apart, so
there TTFT splits into connect | network | queue | prefill and first step, each from a clock that saw it.
Both decode rates count tokens − 1 gaps over first → last token (Ollama: all tokens over its eval time).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from tui.core.measure.records import RequestTiming

TTFT_GAP_NAME = "network + queue + first decode step"
"""What client TTFT − server prompt time is made of."""
TTFT_GAP_NAME_FIRST_STEP_IN = "network + queue"
"""… where the server's prefill time runs to its first token (vLLM), the first step included."""


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
    server_queue_s: float | None = None
    network_s: float | None = None
    """client TTFT − server queue − server prefill-and-first-step: where the server gives both (vLLM)."""
    gap_is: str = TTFT_GAP_NAME

    def to_json(self) -> dict[str, Any]:
        fields = asdict(self)
        return {**{k: v for k, v in fields.items() if k != "gap_is"}, "ttft_gap_is": self.gap_is}

    def ttft_parts(self, connect_s: float | None) -> dict[str, float | None] | None:
        """TTFT as connect | network | queue | prefill and first step, where the server gave queue and prefill."""
        if self.network_s is None:
            return None
        return {"connect_s": connect_s, "network_s": self.network_s, "queue_s": self.server_queue_s,
                "prefill_first_step_s": self.server_prompt_s}


def reconcile(timing: RequestTiming) -> Reconciled | None:
    """Both sides of a request that reported its own split; None when the server gave none."""
    split = timing.server_split
    if split is None:
        return None
    client_ttft, server_prompt = timing.ttft_s, split.prefill_s
    client_decode, server_decode = timing.decode_tok_s, split.decode_tok_s
    gap = client_ttft - server_prompt if client_ttft is not None and server_prompt is not None else None
    network = (gap - split.queue_s if split.prefill_includes_first_step and split.queue_s is not None
               and gap is not None else None)
    return Reconciled(
        client_ttft_s=client_ttft,
        server_prompt_s=server_prompt,
        ttft_gap_s=gap,
        client_decode_tok_s=client_decode,
        server_decode_tok_s=server_decode,
        decode_ratio=client_decode / server_decode if client_decode and server_decode else None,
        server_cached_tokens=split.cached_tokens,
        server_queue_s=split.queue_s,
        network_s=network,
        gap_is=TTFT_GAP_NAME_FIRST_STEP_IN if split.prefill_includes_first_step else TTFT_GAP_NAME,
    )
