"""A chunk is not a token: the gap before each token when chunks carry none, one or several."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tui.core.measure.chunk_tokens import compact, joined, per_token_gaps, settled, token_ends
from tui.core.measure.records import RequestTiming, chunking_line, summarize_requests

STEP = 0.005


def test_a_chunk_of_k_tokens_gives_k_gaps_of_its_gap_over_k():
    offsets = (0.010, 0.010 + 4 * STEP, 0.010 + 6 * STEP)
    assert per_token_gaps(offsets, (1, 4, 2), 7) == pytest.approx((STEP,) * 6)
    # the client's own gap (chunk 0 to 1) goes with the tokens it held
    assert per_token_gaps(offsets, (1, 4, 2), 7, client_gaps=(0,)) == pytest.approx((STEP,) * 2)


def test_chunks_whose_tokens_are_unknown_spread_their_gap_over_the_mean():
    offsets = tuple(0.010 + 4 * STEP * i for i in range(5))  # 5 chunks, 17 tokens: 1 then 4 a chunk, unsaid
    gaps = per_token_gaps(offsets, None, 17)
    assert gaps == pytest.approx((STEP,) * 4) and per_token_gaps(offsets, None, None) == ()


def test_token_ends_and_the_sizes_a_record_keeps():
    assert token_ends((1, 4, 2)) == (0, 4, 6)
    assert compact([1, 1, 1]) is None and compact((1, 3)) == (1, 3)
    assert joined(None, 3, None, 2) is None
    assert joined(None, 3, (4,), 1) == [1, 1, 1, 4] and joined([1, 4], 2, None, 2) == [1, 4, 1, 1]


def test_settled_keeps_token_chunks_checks_the_count_and_says_when_it_cannot():
    # counted right: a text-only chunk (no token of its own) leaves the timing
    assert settled((0.1, 0.2, 0.3), (1, 0, 2), ("a", "b", "cd"), 3, True) == ((0.1, 0.3), (1, 2))
    # counted by events, but the last empty one was no token (a finish chunk): the text chunks make the count
    assert settled((0.1, 0.2, 0.3), (1, 1, 1), ("a", "b", ""), 2, False) == ((0.1, 0.2), None)
    # a server that sent 2 chunks for 5 tokens and said nothing more: every chunk kept, the grouping unknown
    assert settled((0.1, 0.2), (1, 1), ("a", "bcde"), 5, False) == ((0.1, 0.2), None)


def _timing(offsets, sizes=None, output=None) -> RequestTiming:
    return RequestTiming(ok=True, t_sent_unix=0.0, token_offsets_s=tuple(offsets), tokens_per_chunk=sizes,
                         output_tokens=output if output is not None else (sum(sizes) if sizes else len(offsets)))


def test_a_record_of_several_tokens_a_chunk_times_each_token_as_one_a_chunk_does():
    one = _timing([0.010 + STEP * i for i in range(33)])
    four = _timing([0.010 + 4 * STEP * i for i in range(9)], (1, *[4] * 8))
    assert four.itl_s == pytest.approx(one.itl_s) and four.tpot_s == pytest.approx(one.tpot_s)
    assert four.chunk_gaps_s == pytest.approx((4 * STEP,) * 8) and four.token_ends[-1] == 32
    assert four.mean_tokens_per_chunk == pytest.approx(33 / 9) and not four.itl_estimated
    document = four.to_json()
    assert document["tokens_per_chunk"] == [1, *[4] * 8] and len(document["itl_s"]) == 32
    assert len(document["chunk_gaps_s"]) == 8 and document["itl_estimated"] is False
    summary = summarize_requests([four])
    assert summary["itl_s"]["p50"] == pytest.approx(STEP) and summary["chunk_gaps_s"]["p50"] == pytest.approx(4 * STEP)
    assert "chunks carried 3.67 tokens on average (1–4)" in chunking_line([four])
    assert chunking_line([one]) is None


def test_the_grouping_is_said_for_an_answer_timed_as_delivery_but_its_gaps_are_left_out():
    """A server's chunking is what it sent, however the client read it: a lone probe flagged as delivery still says
    its chunks carried several tokens, with no per-chunk gaps from its stamps."""
    four = replace(_timing([0.010 + 4 * STEP * i for i in range(9)], (1, *[4] * 8)), burst="the client read in clumps")
    line = chunking_line([four])
    assert "chunks carried 3.67 tokens on average (1–4)" in line and "per chunk" not in line


def test_unknown_grouping_is_estimated_and_said():
    unsaid = _timing([0.010 + 4 * STEP * i for i in range(9)], None, 33)
    assert unsaid.itl_estimated and unsaid.chunk_tokens is None and unsaid.token_ends is None
    assert sum(unsaid.itl_s) / len(unsaid.itl_s) == pytest.approx(unsaid.tpot_s)
    assert unsaid.to_json()["tokens_per_chunk"] is None
    assert chunking_line([unsaid]).startswith("ITL is per token, estimated")
