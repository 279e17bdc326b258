"""Streams sent together, while all of them decoded: decode's own rate at the batch they make.

From the last stream's first token to the first stream's last token every stream is decoding and none is
prefilling (a stream's prefill ends at its first token), so the steps in between run one batch of them all.
Their rate over the whole send would count the prompts' prefill too (a batch of 32 200-token prompts takes
4 chunked steps of a 2,048-token budget before the last stream decodes), and each stream's own rate over its
whole answer counts the steps it shared with others' prefills.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

from tui.core.measure.records import RequestTiming


def together_decode_tok_s(streams: Sequence[RequestTiming]) -> float | None:
    """All the streams' tokens per second over the stretch in which every one of them decoded.

    Each running sequence gets a token a step, so the batch's rate is the streams' count × a stream's rate in the
    stretch: the median over those whose tokens can be placed in it (the tokens each chunk carried are known)
    and whose timing is generation (not flagged as bursts), each its tokens in the stretch over the time between
    its first and last of them. None when there is no such stretch (a server that runs fewer at a time, so the
    last began after the first ended), when a stream failed, or when fewer than half can be placed.
    """
    if not streams or not all(t.ok and len(t.token_offsets_s) > 1 for t in streams):
        return None
    start = max(t.t_sent_unix + t.token_offsets_s[0] for t in streams)
    end = min(t.t_sent_unix + t.token_offsets_s[-1] for t in streams)
    if end <= start:
        return None
    rates = [rate for t in streams if not t.burst and (rate := _rate_within(t, start, end)) is not None]
    if 2 * len(rates) < len(streams):
        return None
    return len(streams) * median(rates)


def _rate_within(timing: RequestTiming, start: float, end: float) -> float | None:
    """The stream's tokens per second between `start` and `end` (wall clock), or None where they cannot be counted:
    a stream whose chunks cannot be matched to tokens only when the stretch is its whole decode (a lone stream's)."""
    positions = timing.token_ends
    if positions is None:
        whole = (timing.t_sent_unix + timing.token_offsets_s[0], timing.t_sent_unix + timing.token_offsets_s[-1])
        return timing.decode_tok_s if whole == (start, end) else None
    inside = [(timing.t_sent_unix + offset, position) for offset, position in zip(timing.token_offsets_s, positions)
              if start <= timing.t_sent_unix + offset <= end]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])

