"""The selected lane and what is said of it: which request the figures under the timeline speak of (arrow keys
move the selection; a new send selects the newest again), its figures line, and its diagnosis.

The selection is counted back from the newest request (0: the newest), so it stays on the same request
while older ones are dropped from the end; a new send resets it."""

from __future__ import annotations

from collections.abc import Sequence

from tui.core.measure.delivery import DELIVERY_NOT_GENERATION
from tui.core.measure.gaps import Gap, worst_gap
from tui.core.measure.reconcile import reconcile
from tui.core.measure.records import RequestTiming
from tui.core.measure.stats import summarize
from tui.core.view.diagnosis import Finding

NEWEST = 0
"""The default selection: the newest request."""
EMPTY_LINE = "TTFT –   prefill –   decode –   ITL p50 – p99 –"
IN_FLIGHT = "in flight"


def moved(back: int, step: int, count: int) -> int:
    """The selection after an arrow: `step` +1 one lane older (up), −1 one newer (down), kept among `count` lanes."""
    if count <= 0:
        return NEWEST
    return min(max(back + step, 0), count - 1)


def after_send(back: int, new_send: bool, count: int, newer: int = 0) -> int:
    """The selection once the timings change, kept among `count`: after a new send (or when its batch grew), its
    newest lane, `newer` lanes (the load dial's) after it; else the same request, `newer` lanes having come
    since (a selection on the newest follows them, one further back stays on its request)."""
    if new_send:
        return moved(newer, 0, count)
    return moved(back + newer if back != NEWEST else back, 0, count)


def selected_index(count: int, back: int) -> int | None:
    """The index (oldest first) of the selected request among `count`; None when there is none."""
    if count <= 0:
        return None
    return count - 1 - min(max(back, 0), count - 1)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f}"


def ttft_parts(timing: RequestTiming) -> str | None:
    """TTFT's decomposition where the server gave its split: vLLM's queue and prefill-and-first-step (the
    network the rest), or a server's prompt time beside the rest of TTFT; None where it gave none."""
    both = reconcile(timing)
    if both is None or both.client_ttft_s is None:
        return None
    if both.network_s is not None and both.server_queue_s is not None and both.server_prompt_s is not None:
        return (f"TTFT = network {_ms(both.network_s)} + queue {_ms(both.server_queue_s)} "
                f"+ prefill and first step {_ms(both.server_prompt_s)} ms (the server's clock)")
    if both.server_prompt_s is not None and both.ttft_gap_s is not None:
        return f"TTFT = prefill {_ms(both.server_prompt_s)} + {both.gap_is} {_ms(both.ttft_gap_s)} ms (the server's clock)"
    return None


def transfer_text(timing: RequestTiming) -> str | None:
    """A disaggregated request's KV transfer as part of its TTFT ("KV transfer 10.8 ms of TTFT 95.1 ms (11 %),
    512 MB from the prefill worker to the decode worker"); None where nothing moved or the server does not say."""
    split = timing.server_split
    if split is None or not split.kv_transfer_s or timing.ttft_s is None:
        return None
    moved = f", {split.kv_transfer_bytes / 1e6:,.0f} MB" if split.kv_transfer_bytes else ""
    return (f"KV transfer {_ms(split.kv_transfer_s)} ms of TTFT {_ms(timing.ttft_s)} ms "
            f"({split.kv_transfer_s / timing.ttft_s:.0%}){moved} from the prefill worker to the decode worker "
            "(the server's clock)")


def figures_line(timings: Sequence[RequestTiming], ceiling_tok_s: float | None, back: int = NEWEST,
                 labels: Sequence[str] | None = None, gaps: Sequence[Gap] = (), ceiling_factor: float | None = None) -> str:
    """The figures of the selected request (`back` from the newest), named by its label: TTFT (and its parts
    where the server split it), prefill rate and its source, decode rate as a share of the ceiling (a speculating
    server's, × `ceiling_factor` tokens a step, named), its ITL
    p50/p99 (the meter's own gaps left out, and said so), its tokens, and its worst named gap with whose it is.

    A request marked cold (a model load, or a fresh server's first) has its prefill rate labelled "cold
    start"; one timed in bursts shows no ITL (its gaps time the delivery) and says so on a line of its own."""
    index = selected_index(len(timings), back)
    if index is None:
        return EMPTY_LINE
    timing = timings[index]
    name = f"{labels[index]}: " if labels is not None and len(labels) == len(timings) else ""
    if timing.ttft_s is None:
        state = "failed before its first token" if not timing.ok else "TTFT … (waiting for its first token)"
        return f"{name}{state}   {_tokens(timing)}"
    source = f"{timing.prefill_source}, cold start" if timing.cold else timing.prefill_source
    prefill = f"{timing.prefill_tok_s:,.0f} tok/s ({source})" if timing.prefill_tok_s else "–"
    decode = f"{timing.decode_tok_s:,.1f} tok/s" if timing.decode_tok_s else "–"
    share = ""
    if timing.decode_tok_s and ceiling_tok_s:
        share = f" = {timing.decode_tok_s / ceiling_tok_s:.0%} of the {ceiling_tok_s:,.0f} tok/s ceiling"
        if ceiling_factor:
            share += f" ({ceiling_tok_s / ceiling_factor:,.0f} × {ceiling_factor:.2f} tokens a step: speculation)"
    itl = summarize(() if timing.burst else timing.itl_s)
    p50 = f"{itl.p50 * 1e3:.1f} ms" if itl.p50 is not None else "–"
    p99 = f"{itl.p99 * 1e3:.1f} ms" if itl.p99 is not None else "–"
    line = (f"{name}TTFT {_ms(timing.ttft_s)} ms   prefill {prefill}   decode {decode}{share}   "
            f"ITL p50 {p50} p99 {p99}{_per_chunk(timing)}   {_tokens(timing)}")
    if timing.client_gaps:
        line += f" ({len(timing.client_gaps)} of the meter's own gaps left out)"
    worst = worst_gap(gaps)
    if worst is not None:
        line += f"\nworst gap {worst.line()}"
    parts = ttft_parts(timing)
    if parts is not None:
        line += f"\n{parts}"
    moved = transfer_text(timing)
    if moved is not None:
        line += f"\n{moved}"
    if timing.burst:
        line += f"\n{DELIVERY_NOT_GENERATION}: {timing.burst}"
    return line


def _per_chunk(timing: RequestTiming) -> str:
    """How the server grouped the tokens, where a chunk carried other than one (a speculative step's accepted
    tokens, a stream interval's): the ITL beside it is per token, each chunk's gap spread over its tokens."""
    if timing.itl_estimated:
        return " per token (chunks of several tokens, the server not saying how many: spread evenly)"
    if timing.tokens_per_chunk is None or not timing.mean_tokens_per_chunk:
        return ""
    return f" per token ({timing.mean_tokens_per_chunk:.2f} tokens a chunk, its gap spread over them)"


def _tokens(timing: RequestTiming) -> str:
    prompt = f"{timing.prompt_tokens:,}" if timing.prompt_tokens is not None else "?"
    sizes = timing.chunk_tokens
    out = timing.output_tokens if timing.output_tokens is not None else (sum(sizes) if sizes else len(timing.token_offsets_s))
    about = "~" if timing.tokens_estimated else ""
    return f"tokens {about}{prompt} in → {about}{out:,} out"


def diagnosis_text(name: str, findings: Sequence[Finding], in_flight: bool, limit: int = 2) -> str:
    """The diagnosis of the request named: "in flight" until it ends (never a previous request's findings),
    then its first `limit` findings, one a line ("long 2000: decode 205 tok/s is 98% …")."""
    prefix = f"{name}: " if name else ""
    if in_flight:
        return f"{prefix}{IN_FLIGHT}"
    return "\n".join(f"{prefix}{f.phase} {f}" for f in findings[:limit])
