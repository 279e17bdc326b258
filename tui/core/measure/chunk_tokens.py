"""A chunk is not a token: how many tokens each streamed chunk carried, and the gap before each token.

A server may send a token per chunk, a token with empty text (a detokenizer holding back the bytes of a character
not yet whole), several tokens in one chunk (vLLM's `--stream-interval`, a speculative step's accepted tokens), or
a chunk with no token at all (a chat stream's role delta). The count each chunk carried comes from the server's
per-chunk usage where it sends one (vLLM's `continuous_usage_stats`), else one per token event; the final usage
count checks it. Tokens that arrived together in one chunk arrived at one moment, but the server produced them one
step each: the chunk's gap is spread over them, so the per-token ITL and the decode rate count them as made.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from typing import NamedTuple


def per_token_gaps(offsets_s: Sequence[float], sizes: Sequence[int] | None, output_tokens: int | None,
                   client_gaps: Sequence[int] = ()) -> tuple[float, ...]:
    """The gap before each token after the first chunk's: chunk i (i ≥ 1) carrying k tokens gives k gaps of
    (its arrival − chunk i−1's) / k. The tokens the first chunk carried besides its first have no gap of their own
    (none was timed). A gap the client caused (index i: chunk i to i + 1) is left out with its tokens.

    `sizes` None: not known one by one; each chunk then gives one gap over the mean tokens the later chunks carried
    ((output tokens − 1) / (chunks − 1)), which keeps the mean (TPOT) right and the spread only as good as the
    chunks' evenness.
    """
    theirs = set(client_gaps)
    if sizes is None:
        if output_tokens is None or len(offsets_s) < 2:
            return ()
        per_chunk = (output_tokens - 1) / (len(offsets_s) - 1)
        return tuple((offsets_s[i + 1] - offsets_s[i]) / per_chunk for i in range(len(offsets_s) - 1) if i not in theirs)
    gaps: list[float] = []
    for i in range(len(offsets_s) - 1):
        if i in theirs:
            continue
        tokens = sizes[i + 1]
        gaps += [(offsets_s[i + 1] - offsets_s[i]) / tokens] * tokens
    return tuple(gaps)


def token_ends(sizes: Sequence[int]) -> tuple[int, ...]:
    """The output-token index (0-based) of each chunk's last token."""
    return tuple(end - 1 for end in accumulate(sizes))


def joined(sizes: list[int] | None, before: int, more: Sequence[int] | None, added: int) -> list[int] | None:
    """The tokens of `before` chunks so far (`sizes`, None: one each) with those of `added` more (`more`, None: one
    each): None while every chunk carried one, so a stream of one token a chunk keeps no list."""
    if more is None:
        if sizes is not None:
            sizes.extend([1] * added)
        return sizes
    if sizes is None:
        sizes = [1] * before
    sizes.extend(more)
    return sizes


def compact(sizes: Sequence[int] | None) -> tuple[int, ...] | None:
    """`sizes` as a record keeps them: None when every chunk carried one token."""
    if sizes is None or all(size == 1 for size in sizes):
        return None
    return tuple(sizes)


class Chunks(NamedTuple):
    """The chunks a finished stream is timed by: the arrival of each, and its tokens (None: one each, or, where the
    server's count is not the chunks', not known one by one)."""

    offsets_s: tuple[float, ...]
    sizes: tuple[int, ...] | None


def settled(offsets_s: Sequence[float], sizes: Sequence[int], texts: Sequence[str], output_tokens: int | None,
            counted_by_usage: bool) -> Chunks:
    """The chunks of a stream that ended, each read (`offsets_s`, `sizes`: its tokens as counted while reading, 0 for
    a chunk of text alone; `texts`), checked against the server's final count.

    - counted right (or no count to check): the chunks that carried tokens, with their counts;
    - counted by token events that the count disagrees with (a server that sends an empty chunk that is no token, or
      text with no event of its own): the chunks with text, a token each, where they make the count;
    - else the grouping is unknown: every chunk with a token or text, `sizes` None (the record's figures are then
      estimated: `RequestTiming.itl_estimated`).
    """
    carried = sum(sizes)
    if output_tokens is None or carried == output_tokens:
        kept = [i for i, size in enumerate(sizes) if size > 0]
        return Chunks(tuple(offsets_s[i] for i in kept), compact([sizes[i] for i in kept]))
    with_text = [i for i, text in enumerate(texts) if text]
    if not counted_by_usage and len(with_text) == output_tokens:
        return Chunks(tuple(offsets_s[i] for i in with_text), None)
    everything = [i for i, (size, text) in enumerate(zip(sizes, texts, strict=True)) if size > 0 or text]
    return Chunks(tuple(offsets_s[i] for i in everything), None)
