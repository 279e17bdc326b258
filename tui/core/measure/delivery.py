"""Was a request's timing generation, or only delivery? The measurement guard.

When the client cannot read as fast as the server writes (a starved client on a busy 2-core box, a
proxy that buffers, vLLM's busy-polling engine taking every core), tokens arrive in clumps: many
content chunks in one read, then nothing. The stamps then time the delivery, and the figures built on
them lie: a whole answer in one read "decodes" at 50,000 tok/s with an ITL p50 of 0.01 ms. Such a
request is flagged with the reason in one line; its figures are still shown, marked, and kept out of
findings and diagnoses.

Signals, any of which flags a request:
- clumped reads: half or more of its gaps are back to back (far shorter than any decode step), or
  one clump held a large share of its tokens;
- faster than the server: the client's decode rate well above the one the server reports for the
  same request, or its ITL p50 far below the server's mean gap;
- faster than physics: the decode rate above the device's bandwidth ceiling;
- a client that paused over most gaps: too few of the server's own gaps are left to judge (a short
  answer with a pause or two keeps its few server gaps, judged like any other's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import groupby

from tui.core.measure.records import RequestTiming, mark_cold
from tui.core.measure.stats import summarize

BACK_TO_BACK_S = 200e-6
"""Chunks this close came back to back from the socket, not a decode step apart: no server steps in 0.2 ms
(an HTTP chunk is one SSE event, so a clump read at once is stamped per chunk, tens of µs apart)."""
BACK_TO_BACK_OF_SERVER_GAP = 0.1
"""Where the server gives its own mean gap, a tenth of it is back to back too."""
CLUMPED_GAP_SHARE = 0.5
"""Half the gaps back to back: the ITL median itself is then the client's reading, not the server's steps
(on a loaded 2-core box real vLLM's answers show 10–35 % back to back while the decode rate still agrees)."""
BIG_CLUMP_SHARE = 0.25
BIG_CLUMP_MIN = 8
"""One clump holding a quarter of the chunks, and at least 8, is a burst (a client paused for a moment); real
vLLM's API server on a loaded 2-core box delivers clumps of 5–8 now and then with the decode rate still right."""
SERVER_RATE_FACTOR = 1.5
"""A client cannot see tokens faster than the server wrote them; half as fast again is past any jitter."""
SERVER_GAP_FACTOR = 0.25
CEILING_FACTOR = 1.2
"""Slack over the bandwidth ceiling for a preset's rough figures."""
MIN_GAPS = 4
"""Fewer gaps than this say nothing about clumping."""

DELIVERY_NOT_GENERATION = "delivery, not generation"


def burst_reason(timing: RequestTiming, ceiling_tok_s: float | None = None) -> str | None:
    """Why this request's figures time the delivery rather than the generation; None when they can be trusted."""
    if not timing.ok or len(timing.token_offsets_s) <= MIN_GAPS:
        return None
    gaps = timing.chunk_gaps_s  # as delivered: a clump is chunks read at once, whatever tokens they carried
    chunks = len(timing.token_offsets_s)
    if len(gaps) < MIN_GAPS and len(timing.client_gaps) >= CLUMPED_GAP_SHARE * (chunks - 1):
        return (f"{len(timing.client_gaps)} of {chunks - 1} gaps were the client's own pauses: too few left to time "
                "the server")
    split = timing.server_split
    server_rate = split.decode_tok_s if split else None
    # A chunk of several tokens (a stream interval, a speculative step) comes that many tokens' time after the last.
    per_chunk = timing.mean_tokens_per_chunk or 1.0
    tight = max(BACK_TO_BACK_S, BACK_TO_BACK_OF_SERVER_GAP * per_chunk / server_rate) if server_rate else BACK_TO_BACK_S
    back_to_back = [gap <= tight for gap in gaps]
    if sum(back_to_back) >= CLUMPED_GAP_SHARE * len(gaps):
        return f"{sum(back_to_back)} of {len(gaps)} gaps under {tight * 1e3:.1f} ms: the client read in clumps"
    biggest = 1 + max((sum(1 for _ in run) for close, run in groupby(back_to_back) if close), default=0)
    if biggest >= max(BIG_CLUMP_MIN, BIG_CLUMP_SHARE * chunks):
        return f"{biggest} of {chunks} chunks arrived back to back: the client was held up, then read them at once"
    client_rate = timing.decode_tok_s
    if client_rate and server_rate and client_rate > SERVER_RATE_FACTOR * server_rate:
        return f"decode {client_rate:,.0f} tok/s seen against {server_rate:,.0f} by the server's own clock"
    client_p50 = summarize(timing.itl_s).p50
    if client_p50 is not None and server_rate and client_p50 < SERVER_GAP_FACTOR / server_rate:
        return f"ITL p50 {client_p50 * 1e3:.2f} ms against the server's mean {1e3 / server_rate:.2f} ms"
    if client_rate and ceiling_tok_s and client_rate > CEILING_FACTOR * ceiling_tok_s:
        return f"decode {client_rate:,.0f} tok/s is above the bandwidth ceiling of {ceiling_tok_s:,.0f}"
    return None


@dataclass(frozen=True, slots=True)
class Guard:
    """What phasetop knows of a server that a request's own figures do not say, and every measurement is judged by:
    whether the server was fresh (its first request pays its cold start; None: unknown), one stream's decode
    ceiling from the bandwidth, and the tokens a step of a server that speculates (a step reads the weights once
    for that many, so its streams may pass the bandwidth's ceiling by as much)."""

    fresh: bool | None = None
    bandwidth_ceiling_tok_s: float | None = None
    tokens_per_step: float | None = None
    """A speculating server's mean accepted length (its /metrics); None for one that does not speculate."""

    @property
    def ceiling_tok_s(self) -> float | None:
        """No stream decodes faster: the bandwidth's ceiling × the tokens a step."""
        base, factor = self.bandwidth_ceiling_tok_s, self.tokens_per_step
        return base * factor if base is not None and factor else base

    def speculating(self, tokens_per_step: float | None) -> Guard:
        """This guard where the server's latest word on its tokens a step is `tokens_per_step` (None: no word, so
        the last one stands)."""
        return replace(self, tokens_per_step=tokens_per_step) if tokens_per_step else self

    def flagged(self, requests: Sequence[RequestTiming]) -> list[RequestTiming]:
        """The requests with `burst` set on those whose timing is delivery, not generation."""
        ceiling = self.ceiling_tok_s
        return [replace(r, burst=reason) if (reason := burst_reason(r, ceiling)) else r for r in requests]

    def judged(self, requests: Sequence[RequestTiming]) -> list[RequestTiming]:
        """The requests of one measurement, sent in order: the first marked cold where it paid a start-up cost
        (`mark_cold`, knowing whether the server was fresh), and each flagged where it timed delivery."""
        return self.flagged(mark_cold(list(requests), server_fresh=self.fresh))


def burst_line(requests: list[RequestTiming], consequence: str = "kept out of the summary and findings") -> str | None:
    """One line for a person: how many requests were flagged, what became of them, and why (the first reason)."""
    flagged = [r for r in requests if r.burst]
    if not flagged:
        return None
    return f"{len(flagged)} of {len(requests)} requests timed {DELIVERY_NOT_GENERATION} ({consequence}): {flagged[0].burst}"
