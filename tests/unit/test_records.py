import pytest

from tui.core.measure.records import RequestTiming, ServerSplit, mark_cold, summarize_requests


def timing(offsets, output_tokens=None, prompt_tokens=100, **kw):
    return RequestTiming(ok=True, t_sent_unix=1000.0, token_offsets_s=tuple(offsets),
                         output_tokens=output_tokens if output_tokens is not None else len(offsets),
                         prompt_tokens=prompt_tokens, **kw)


def test_phase_figures_follow_spec_definitions():
    r = timing([0.5, 0.6, 0.7, 0.9])
    assert r.ttft_s == 0.5
    assert r.e2e_s == 0.9
    assert r.itl_s == pytest.approx((0.1, 0.1, 0.2))
    assert r.tpot_s == pytest.approx(0.4 / 3)
    assert r.decode_tok_s == pytest.approx(3 / 0.4)
    assert r.prefill_tok_s == pytest.approx(100 / 0.5)
    assert r.prefill_source == "client"


def test_tpot_uses_server_token_count_not_chunk_count():
    # 3 chunks carried 9 tokens (e.g. speculative decoding, or a batching server)
    r = timing([1.0, 2.0, 3.0], output_tokens=9)
    assert r.tpot_s == pytest.approx(2.0 / 8)
    assert r.decode_tok_s == pytest.approx(8 / 2.0)


def test_server_split_wins_for_prefill_rate():
    split = ServerSplit(prefill_s=0.05, decode_s=1.0, prompt_tokens=1000, output_tokens=64)
    r = timing([0.2, 0.3], server_split=split)
    assert r.prefill_tok_s == pytest.approx(20000)
    assert r.prefill_source == "server"
    assert split.decode_tok_s == pytest.approx(63)  # first → last token: 63 gaps for 64 tokens


def test_single_token_has_no_decode_figures():
    r = timing([0.3])
    assert r.ttft_s == 0.3 and r.tpot_s is None and r.decode_tok_s is None and r.itl_s == ()


def test_failed_request_keeps_what_arrived_and_is_left_out_of_summary():
    failed = RequestTiming(ok=False, t_sent_unix=0.0, token_offsets_s=(0.4, 0.5), error="cut")
    good = timing([0.1, 0.2, 0.3])
    assert failed.to_json()["token_offsets_s"] == [0.4, 0.5]
    summary = summarize_requests([good, failed])
    assert summary["ttft_s"]["n"] == 1 and summary["ttft_s"]["p50"] == 0.1
    assert summary["itl_s"]["n"] == 2


def test_itl_is_pooled_over_requests():
    summary = summarize_requests([timing([0.1, 0.2]), timing([0.1, 0.4, 0.5])])
    assert summary["itl_s"]["n"] == 3
    assert summary["itl_s"]["p50"] == pytest.approx(0.1)


def test_json_has_spec_keys():
    keys = set(timing([0.1, 0.2]).to_json())
    assert {"ok", "error", "prompt_tokens", "output_tokens", "connect_s", "ttft_s", "e2e_s", "tpot_s",
            "decode_tok_s", "prefill_tok_s", "itl_s", "t_sent_unix", "token_offsets_s", "server_split"} <= keys


def test_first_request_far_slower_is_cold():
    runs = [timing([5.0, 5.1]), timing([0.1, 0.2]), timing([0.12, 0.2])]
    marked = mark_cold(runs)
    assert marked[0].cold and not marked[1].cold


def test_first_request_like_the_rest_is_not_cold():
    runs = [timing([0.11, 0.2]), timing([0.1, 0.2]), timing([0.12, 0.2])]
    assert not mark_cold(runs)[0].cold


def test_server_reported_load_marks_cold():
    runs = [timing([0.1, 0.2], server_split=ServerSplit(load_s=2.0))]
    assert mark_cold(runs)[0].cold


def test_a_first_request_a_few_ms_slower_is_warm_up_not_a_model_load():
    runs = [timing([0.026, 0.03]), timing([0.008, 0.01]), timing([0.0084, 0.01])]
    assert not mark_cold(runs)[0].cold


@pytest.mark.parametrize(("server_fresh", "cold"), [(True, True), (False, False), (None, False)])
def test_the_first_request_to_a_fresh_server_is_cold_whatever_its_ttft(server_fresh, cold):
    runs = [timing([0.0206, 0.03]), timing([0.0074, 0.01]), timing([0.0075, 0.01])]  # the simulator's 20 ms against 7
    marked = mark_cold(runs, server_fresh=server_fresh)
    assert [r.cold for r in marked] == [cold, False, False]
    assert mark_cold(runs[:1], server_fresh=server_fresh)[0].cold == cold  # alone: no others to compare with


def test_every_token_in_the_first_chunk_is_tpot_zero_as_vllm_counts_it():
    timing = RequestTiming(ok=True, t_sent_unix=0.0, token_offsets_s=(0.05,), output_tokens=3)
    assert timing.tpot_s == 0.0
    assert timing.decode_tok_s is None  # no time to divide by: no rate, not an infinite one
    assert RequestTiming(ok=True, t_sent_unix=0.0, token_offsets_s=(0.05,), output_tokens=1).tpot_s is None
