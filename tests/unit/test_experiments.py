"""Experiment rows and findings from fixed timings, and the plan's checks: no server, no event loop."""

import pytest

from tui.core.experiment_findings import finding
from tui.core.experiments import (
    CONTEXT_PROMPT_TOKENS,
    CONTEXT_WINDOW,
    DEFAULT_VALUES,
    EXPERIMENTS,
    aggregate_tok_s,
    concurrency_row,
    context_rows,
    describe_row,
    interference_gaps,
    interference_row,
    make_plan,
    prefix_row,
    prompt_length_row,
)
from tui.core.records import RequestTiming, ServerSplit


def timing(ttft, itl=0.005, tokens=11, sent=1000.0, ok=True, **kw):
    offsets = tuple(ttft + i * itl for i in range(tokens))
    return RequestTiming(ok=ok, t_sent_unix=sent, token_offsets_s=offsets, output_tokens=tokens, **kw)


def stream(sent, offsets):
    return RequestTiming(ok=True, t_sent_unix=sent, token_offsets_s=tuple(offsets), output_tokens=len(offsets))


def test_prompt_length_rows_take_medians_and_the_finding_compares_first_and_last():
    short = prompt_length_row(200, [timing(0.007), timing(0.008), timing(0.030)])
    long = prompt_length_row(2000, [timing(0.066, itl=0.0051), timing(0.066, itl=0.0051), timing(0.5, ok=False)])
    assert short["ttft_s"] == pytest.approx(0.008) and short["n"] == 3
    assert long["n"] == 2  # the failed request counts for nothing
    assert short["decode_tok_s"] == pytest.approx(200)
    assert finding("prompt-tokens", [short, long]) == "TTFT ×8.2 from 200 to 2,000 tokens (8.00 → 66.0 ms); decode −2.0 %"


def test_prefix_finding_names_a_hit_only_when_the_second_ttft_drops():
    split = ServerSplit(cached_tokens=1984)
    hit = prefix_row(2000, [timing(0.070)], [timing(0.071)], [timing(0.007, server_split=split)])
    assert hit["second_vs_first"] == pytest.approx(0.007 / 0.071) and hit["cached_tokens"] == 1984
    assert finding("prefix", [hit]) == "a 2,000-token prefix sent again: TTFT ×0.10 (71.0 → 7.00 ms), prefix-cache hit; a unique prompt 70.0 ms"
    miss = prefix_row(2000, [timing(0.070)], [timing(0.071)], [timing(0.069)])
    assert "no prefix-cache hit" in finding("prefix", [miss])


def test_aggregate_throughput_spans_first_send_to_last_token():
    # two streams of 11 tokens, the second sent 0.1 s later, both ending 0.06 s after their send
    batch = [timing(0.01, sent=10.0), timing(0.01, sent=10.1)]
    assert aggregate_tok_s(batch) == pytest.approx(22 / 0.16)
    assert aggregate_tok_s([timing(0.01, ok=False)]) is None


def test_concurrency_finding_reports_throughput_and_tail_ratios():
    one = concurrency_row(1, [[timing(0.007, itl=0.005, tokens=101)]])
    eight = concurrency_row(8, [[timing(0.010, itl=0.0055, tokens=101) for _ in range(8)]])
    assert one["itl_p99_s"] == pytest.approx(0.005)
    assert eight["aggregate_tok_s"] == pytest.approx(8 * 101 / (0.010 + 100 * 0.0055))
    line = finding("concurrency", [one, eight])
    assert line.startswith("aggregate ×7.2 from 1 to 8 streams (199 → 1,443 tok/s)")
    assert line.endswith("p99 ITL ×1.1 (5.00 → 5.50 ms)")


def test_interference_places_each_gap_before_during_or_after_the_long_prefill():
    # a running stream ticks every 5 ms from 0.1 s; the long prompt is sent at 0.2 s and its first
    # token comes at 0.3 s; meanwhile the stream's one gap stretches from 0.2 to 0.305
    ticks = [0.1 + 0.005 * i for i in range(21)] + [0.3 + 0.005 * i for i in range(1, 21)]
    background = [stream(50.0, ticks)]
    intruder = RequestTiming(ok=True, t_sent_unix=50.2, token_offsets_s=(0.1,), output_tokens=1)
    gaps, sent, first = interference_gaps(background, intruder)
    assert (sent, first) == (pytest.approx(0.2), pytest.approx(0.3))
    phases = [g.phase for g in gaps]
    assert phases.count("before") == 20 and phases.count("during") == 1 and phases.count("after") == 19
    row = interference_row(4000, [(background, intruder)])
    assert row["itl_before_s"] == pytest.approx(0.005)
    assert row["itl_during_s"] == pytest.approx(0.105)
    assert row["spike"] == pytest.approx(21)
    assert row["streams_end_s"] == pytest.approx(0.4)
    assert finding("interference", [row]) == (
        "running streams' ITL ×21.0 while a 4,000-token prompt prefilled (5.00 → 105 ms worst gap), 5.00 ms after"
    )


def test_context_rows_read_the_window_of_gaps_ending_at_each_position():
    prompt = 32
    # gap i (before output token i) is 4 ms + 1 µs per token of context
    gaps = [0.004 + 1e-6 * (prompt + i) for i in range(1, 1000)]
    offsets = [0.01]
    for gap in gaps:
        offsets.append(offsets[-1] + gap)
    rows = context_rows([300, 1000], [stream(0.0, offsets)], prompt)
    assert [r["n"] for r in rows] == [CONTEXT_WINDOW, CONTEXT_WINDOW]
    # the window (p − 256, p] has its middle at p − 127.5
    assert rows[0]["itl_mean_s"] == pytest.approx(0.004 + 1e-6 * (300 - 127.5))
    assert rows[1]["itl_p50_s"] == pytest.approx(0.004 + 1e-6 * (1000 - 127.5))
    line = finding("context", rows)
    assert line == "ITL +17 % from token 300 to 1,000 (4.17 → 4.87 ms)"


def test_context_finding_is_not_fooled_by_tokens_read_in_bursts():
    # 5 ms steps, but a busy client reads the tokens four at a time: single gaps are 0 or 20 ms
    prompt = 32
    true = [0.005 * i for i in range(1100)]
    read = [true[min(4 * -(-i // 4), len(true) - 1)] for i in range(len(true))]
    rows = context_rows([544, 1056], [stream(0.0, read)], prompt)
    assert rows[0]["itl_p50_s"] == 0.0
    assert finding("context", rows) == "ITL +0.0 % from token 544 to 1,056 (5.00 → 5.00 ms)"


def test_findings_say_so_when_there_is_too_little_to_compare():
    lone = prompt_length_row(200, [timing(0.007)])
    assert finding("prompt-tokens", [lone]) == "not enough prompt lengths measured to compare"
    assert finding("concurrency", []) == "not enough stream counts measured to compare"
    assert finding("prefix", []) == "no shared prefix measured twice"


def test_describe_row_shows_units_and_missing_values():
    row = {"prompt_tokens": 2000, "ttft_s": 0.0661, "decode_tok_s": 204.3, "prefill_tok_s": None, "itl_p50_s": 0.0049}
    assert describe_row("prompt-tokens", row) == "prompt tokens 2,000, TTFT 66.1 ms, decode 204 tok/s, prefill -, ITL p50 4.90 ms"


def test_plan_defaults_sort_and_dedupe():
    for vary in EXPERIMENTS:
        plan = make_plan(vary)
        assert plan.values == DEFAULT_VALUES[vary]
    assert make_plan("prompt-tokens", [2000, 200, 2000]).values == (200, 2000)
    context = make_plan("context", [1000, 4000])
    assert context.max_tokens == 4000 - CONTEXT_PROMPT_TOKENS + 1


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("sideways",), "unknown experiment"),
        (("prompt-tokens", []), "at least one value"),
        (("prompt-tokens", [0, 200]), "at least 1"),
        (("prompt-tokens", [200], 1), "max-tokens must be at least 2"),
        (("interference", [4000], 10), "at least 64"),
        (("concurrency", [1, 1000]), "at most 256 streams"),
        (("context", [1000], 64), "does not apply"),
        (("context", [100]), "at least 288"),
        (("prefix", [1000], None, 0), "repeat must be"),
        (("prompt-tokens", list(range(1, 40))), "at most 32 values"),
    ],
)
def test_plans_that_cannot_run_are_refused_in_one_line(args, words):
    with pytest.raises(ValueError, match=words) as caught:
        make_plan(*args)
    assert "\n" not in str(caught.value)


def test_plan_must_fit_the_servers_context_length():
    with pytest.raises(ValueError, match="exceeds the server's max_model_len"):
        make_plan("prompt-tokens", [200, 8000], 64, max_model_len=4096)
    assert make_plan("prompt-tokens", [200, 4000], 64, max_model_len=4096).values == (200, 4000)
