"""Decode's rate over the stretch in which every stream sent together decoded, against timings built by hand."""

import pytest

from tui.core.experiments.rows import concurrency_row
from tui.core.measure.records import RequestTiming
from tui.core.measure.together import together_decode_tok_s


def stream(offsets, sent=100.0, **kw) -> RequestTiming:
    return RequestTiming(ok=True, t_sent_unix=sent, token_offsets_s=tuple(offsets),
                         output_tokens=kw.pop("output_tokens", len(offsets)), **kw)


TICKS = [0.030 + 0.005 * i for i in range(21)]
"""Every 5 ms from 30 ms: 200 tok/s a stream."""
FIRST = stream([0.010, *TICKS[:17]])
"""Its first token at 10 ms, then a 20 ms step (the second stream's prefill), then the ticks to 110 ms."""
SECOND = stream(TICKS)
"""Prefilled in that step: its first token at 30 ms, its last at 130 ms."""


def test_the_stretch_leaves_out_the_step_the_second_stream_prefilled_in():
    # together from 30 ms (the second's first token) to 110 ms (the first's last): 16 gaps of 5 ms each
    assert together_decode_tok_s([FIRST, SECOND]) == pytest.approx(400)
    # the streams' own rates count the 20 ms step: 17 gaps over 100 ms, and 20 over 100 ms
    assert FIRST.decode_tok_s + SECOND.decode_tok_s == pytest.approx(170 + 200)


def test_a_batch_steps_together_so_streams_whose_tokens_cannot_be_placed_count_at_the_others_rate():
    two_a_chunk = stream(TICKS[::2], output_tokens=21, tokens_per_chunk=(1, *[2] * 10))  # every 10 ms
    assert together_decode_tok_s([two_a_chunk, SECOND]) == pytest.approx(400)
    unmatched = stream([0.010, *TICKS[:17:2]], output_tokens=18)  # 10 chunks, 18 tokens, no positions: which when?
    late = stream(TICKS, burst="its first chunk was read late")
    # in the batch, but not timing it: 4 streams at the rate of the two whose tokens can be placed
    assert together_decode_tok_s([unmatched, late, SECOND, SECOND]) == pytest.approx(4 * 200)
    assert together_decode_tok_s([unmatched, unmatched, SECOND]) is None  # fewer than half placed
    assert together_decode_tok_s([unmatched]) == pytest.approx(17 / 0.100)  # alone, the stretch is its whole decode


@pytest.mark.parametrize("streams", [
    [FIRST, stream(TICKS, sent=100.2)],  # the second began after the first ended: a server running one at a time
    [FIRST, RequestTiming(ok=False, t_sent_unix=100.0, token_offsets_s=(0.03,), error="refused")],
    [],
])
def test_no_rate_without_a_stretch_of_all_of_them(streams):
    assert together_decode_tok_s(streams) is None


def test_a_concurrency_row_holds_the_batch_rate_and_the_context_the_streams_read():
    first, second = (stream(s.token_offsets_s, prompt_tokens=200) for s in (FIRST, SECOND))
    row = concurrency_row(2, [[first, second]])
    assert row["batch_decode_tok_s"] == pytest.approx(400)
    assert row["context_tokens"] == pytest.approx(200 + (18 + 21) / 2 / 2)  # a prompt, and half an answer, each
    assert concurrency_row(2, [[FIRST, SECOND]])["context_tokens"] is None  # no prompt counts: the context is unknown
