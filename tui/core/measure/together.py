"""Streams sent together, while all of them decoded: decode's own rate at the batch they make.

From the last stream's first token to the first stream's last token every stream is decoding and none is
prefilling (a stream's prefill ends at its first token), so the steps in between run one batch of them all.
Their rate over the whole send would count the prompts' prefill too (a batch of 32 200-token prompts takes
4 chunked steps of a 2,048-token budget before the last stream decodes), and each stream's own rate over its
whole answer counts the steps it shared with others' prefills.
"""

from __future__ import annotations

from collections.abc import Sequence

from tui.core.measure.records import RequestTiming


def together_decode_tok_s(streams: Sequence[RequestTiming]) -> float | None:
    """All the streams' tokens per second over the stretch in which every one of them decoded, added up: each
    stream's tokens in the stretch over the time between its first and last of them.

    None when there is no such stretch (a server that runs fewer at a time, so the last began after the first
    ended), when a stream failed, was timed in bursts, or its chunks cannot be matched to tokens (several tokens
    a chunk, with no positions), or when a stream had fewer than two tokens in the stretch.
    """
    if not streams or not all(t.ok and not t.burst and len(t.token_offsets_s) > 1 for t in streams):
        return None
    start = max(t.t_sent_unix + t.token_offsets_s[0] for t in streams)
    end = min(t.t_sent_unix + t.token_offsets_s[-1] for t in streams)
    if end <= start:
        return None
    total = 0.0
    for timing in streams:
        positions = _positions(timing)
        if positions is None:
            return None
        inside = [(timing.t_sent_unix + offset, position) for offset, position in zip(timing.token_offsets_s, positions)
                  if start <= timing.t_sent_unix + offset <= end]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None
        total += (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])
    return total


def _positions(timing: RequestTiming) -> Sequence[int] | None:
    """Each chunk's output-token index: the server's where it streamed one event a token, else the chunk's own
    index when there are as many chunks as tokens; None when neither holds."""
    if timing.token_positions is not None and len(timing.token_positions) == len(timing.token_offsets_s):
        return timing.token_positions
    if timing.output_tokens == len(timing.token_offsets_s):
        return range(len(timing.token_offsets_s))
    return None
