"""Experiment rows and findings from fixed timings, and the plan's checks: no server, no event loop."""

import random
import re
from dataclasses import replace

import pytest

from tui.core.experiments.findings import finding, finding_figures
from tui.core.experiments.columns import describe_row
from tui.core.experiments.plans import BACKGROUND_PROMPT_TOKENS, CONTEXT_PROMPT_TOKENS, CONTEXT_WINDOW, DEFAULT_VALUES, EXPERIMENTS, PREFIX_TAIL_TOKENS, fit_margin, make_plan
from tui.core.experiments.rows import aggregate_tok_s, concurrency_row, context_rows, interference_gaps, interference_row, prefix_row, prompt_length_row
from tui.core.measure.records import RequestTiming, ServerSplit


def timing(ttft, itl=0.005, tokens=11, sent=1000.0, ok=True, **kw):
    offsets = tuple(ttft + i * itl for i in range(tokens))
    return RequestTiming(ok=ok, t_sent_unix=sent, token_offsets_s=offsets, output_tokens=tokens, **kw)


def stream(sent, offsets):
    return RequestTiming(ok=True, t_sent_unix=sent, token_offsets_s=tuple(offsets), output_tokens=len(offsets))


def test_prompt_length_rows_take_medians_and_the_finding_compares_first_and_last():
    short = prompt_length_row(200, [timing(0.007, sent=1), timing(0.008, sent=2), timing(0.030, sent=3)])
    long = prompt_length_row(2000, [timing(0.066, itl=0.0051, sent=4), timing(0.066, itl=0.0051, sent=5),
                                    timing(0.5, ok=False, sent=6)])
    assert short["ttft_s"] == pytest.approx(0.008) and short["n"] == 3
    assert long["n"] == 2  # the failed request counts for nothing
    assert short["decode_tok_s"] == pytest.approx(200)
    # three requests a length give no interval: the finding says so, and about how many more would
    assert finding("prompt-tokens", [short, long]) == (
        "TTFT ×8.2 from 200 to 2,000 tokens (8.00 → 66.0 ms, not enough: n=2, ~12 more); decode −2.0 % (not enough: n=2, ~15 more)")


def jittered(ttft, n, itl=0.005, start=0.0, seed=0):
    """n requests one after another, each TTFT and ITL within ±10 % of the given ones."""
    rng = random.Random(seed)
    return [timing(ttft * rng.uniform(0.9, 1.1), itl=itl * rng.uniform(0.9, 1.1), sent=start + k) for k in range(n)]


def test_with_enough_repeats_a_change_is_sure_with_its_interval_and_a_same_figure_is_a_tie():
    short, long = prompt_length_row(200, jittered(0.008, 12)), prompt_length_row(2000, jittered(0.066, 12, seed=1))
    low, high = short["intervals"]["ttft_s"]["ci"]
    assert low < short["ttft_s"] < high and short["intervals"]["ttft_s"]["n"] == 12
    line = finding("prompt-tokens", [short, long])
    assert re.search(r"\(\d\.\d\d → 6\d\.\d ms, sure: \[\+5\d\.\d … \+6\d\.\d\] ms\)", line), line
    ttft, decode = finding_figures("prompt-tokens", [short, long])
    assert ttft["verdict"] == "worse" and ttft["ci_low"] > 0 and ttft["from"] == "200 prompt tokens"
    assert ttft["level"] == pytest.approx(0.98)  # two 99 % intervals' far ends
    assert decode["verdict"] != "worse"  # the same ITL spread at both lengths: no change named
    assert describe_row("prompt-tokens", short).startswith(
        f"prompt tokens 200, TTFT {short['ttft_s'] * 1000:.2f} [{low * 1000:.2f}…{high * 1000:.2f}] ms")


def test_prefix_finding_names_a_hit_only_when_the_second_ttft_drops():
    split = ServerSplit(cached_tokens=1984)
    hit = prefix_row(2000, [timing(0.070)], [timing(0.071)], [timing(0.007, server_split=split)])
    assert hit["second_vs_first"] == pytest.approx(0.007 / 0.071) and hit["cached_tokens"] == 1984
    assert finding("prefix", [hit]) == ("a 2,000-token prefix sent again: TTFT ×0.10 (71.0 → 7.00 ms, not enough: n=1, ~5 more), "
                                        "prefix-cache hit; a unique prompt 70.0 ms")
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
    # one round is one value of the aggregate: no interval until rounds are repeated
    assert line.startswith("aggregate ×7.2 from 1 to 8 streams (199 → 1,443 tok/s, not enough: n=1, ~")
    assert "p99 ITL ×1.1 (5.00 → 5.50 ms, " in line


def test_concurrency_rows_judge_the_tail_over_stretches_of_the_run_not_gap_by_gap():
    one = concurrency_row(1, [jittered(0.007, 1, itl=0.005)[0:1] for _ in range(1)])
    many = concurrency_row(8, [[timing(0.010, itl=0.005 * (1.5 + 0.1 * (k % 3)), tokens=201, sent=5.0) for k in range(8)]])
    assert one["intervals"]["itl_p99_s"]["n"] < 11 * 5  # 11 gaps a stretch: far fewer draws than gaps
    assert many["intervals"]["itl_p99_s"]["n"] < 201  # 8 streams sent together: a stretch holds all 8 streams' gaps
    assert many["intervals"]["ttft_p50_s"]["n"] == 1 and many["intervals"]["ttft_p50_s"]["ci"] is None


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
    assert row["stall"]["verdict"] == "not_enough_data"  # one round: its stall is one draw
    assert finding("interference", [row]) == (
        "running streams' ITL ×21.0 while a 4,000-token prompt prefilled (5.00 → 105 ms worst gap, not sure from 1 round: "
        "more rounds (--repeat) would tell), 5.00 ms after"
    )


def test_two_rounds_whose_stall_tops_every_stretch_before_it_make_the_stall_sure():
    # 5 ms ticks for 1 s before the long prompt lands (40 stretches of 25 ms), then one 105 ms gap
    ticks = [0.01 + 0.005 * i for i in range(199)] + [1.1 + 0.005 * i for i in range(20)]
    rounds = [([stream(sent, ticks)], RequestTiming(ok=True, t_sent_unix=sent + 1.0, token_offsets_s=(0.1,), output_tokens=1))
              for sent in (50.0, 60.0)]
    one, two = interference_row(4000, rounds[:1]), interference_row(4000, rounds)
    assert one["stall"]["verdict"] == "not_enough_data"  # 1 in 40 alike stretches would top the rest
    assert two["stall"]["verdict"] == "worse"  # two rounds' stalls above every stretch before them
    assert "100 ms worst gap, sure: above every stretch of gaps before it)" in finding("interference", [two])


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
    assert line.startswith("ITL +17 % from token 300 to 1,000 (4.17 → 4.87 ms, sure: [+0.")


def test_context_rows_count_token_positions_where_a_chunk_carried_two_tokens():
    # 5 ms steps; every 10th token comes in one chunk with the next, so that chunk comes 10 ms after the last
    prompt = 32
    positions = [i for i in range(1100) if i % 10 != 9]
    sizes = (1, *(b - a for a, b in zip(positions, positions[1:])))
    timing = RequestTiming(ok=True, t_sent_unix=0.0, token_offsets_s=tuple(0.005 * i for i in positions),
                           output_tokens=sum(sizes), tokens_per_chunk=sizes)
    rows = context_rows([544, 1056], [timing], prompt)
    assert [r["n"] for r in rows] == [CONTEXT_WINDOW, CONTEXT_WINDOW]  # chunk counts would leave 1,056 short
    assert rows[1]["itl_mean_s"] == pytest.approx(0.005) and rows[1]["itl_p50_s"] == pytest.approx(0.005)


def test_context_finding_is_not_fooled_by_tokens_read_in_bursts():
    # 5 ms steps, but a busy client reads the tokens four at a time: single gaps are 0 or 20 ms
    prompt = 32
    true = [0.005 * i for i in range(1100)]
    read = [true[min(4 * -(-i // 4), len(true) - 1)] for i in range(len(true))]
    rows = context_rows([544, 1056], [stream(0.0, read)], prompt)
    assert rows[0]["itl_p50_s"] == 0.0
    assert finding("context", rows).startswith("ITL +0.0 % from token 544 to 1,056 (5.00 → 5.00 ms, ")
    assert "sure" not in finding("context", rows)


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


def longest_request(plan) -> int:
    """Prompt plus generated tokens of the plan's longest request, as the drivers send them."""
    if plan.vary == "prompt-tokens":
        return plan.values[-1] + plan.max_tokens
    if plan.vary == "prefix":
        return plan.values[-1] + PREFIX_TAIL_TOKENS + plan.max_tokens
    if plan.vary == "interference":
        return max(plan.values[-1] + 1, BACKGROUND_PROMPT_TOKENS + plan.max_tokens)
    if plan.vary == "context":
        return CONTEXT_PROMPT_TOKENS + plan.max_tokens
    return BACKGROUND_PROMPT_TOKENS + plan.max_tokens


@pytest.mark.parametrize("max_model_len", [4096, 1024, 512])
@pytest.mark.parametrize("vary", EXPERIMENTS)
def test_default_plans_fit_the_servers_context_length_less_the_margin(vary, max_model_len):
    plan = make_plan(vary, max_model_len=max_model_len)
    assert longest_request(plan) <= max_model_len - fit_margin(max_model_len)
    assert plan.values == tuple(sorted(set(plan.values)))
    assert bool(plan.scaled) == (replace(plan, scaled=()) != make_plan(vary))  # a note exactly when something moved
    for note in plan.scaled:
        assert f"to fit max_model_len {max_model_len:,} ({fit_margin(max_model_len)} tokens kept free)" in note
        assert "\n" not in note


@pytest.mark.parametrize(
    ("vary", "values", "note"),
    [
        ("prompt-tokens", (200, 500, 1000, 2000), None),
        ("prefix", (1000, 2000, 3900), "prefix tokens 4,000 → 3,900 to fit max_model_len 4,096 (128 tokens kept free)"),
        ("concurrency", (1, 2, 4, 8, 16, 32), None),
        ("interference", (3900,), "long prompt tokens 4,000 → 3,900 to fit max_model_len 4,096 (128 tokens kept free)"),
        ("context", (1000, 2000, 3900), "positions 4,000, 8,000 → 3,900 to fit max_model_len 4,096 (128 tokens kept free)"),
    ],
)
def test_on_a_4096_token_server_the_defaults_that_do_not_fit_come_down_and_say_so(vary, values, note):
    plan = make_plan(vary, max_model_len=4096)
    assert plan.values == values
    assert plan.scaled == ((note,) if note else ())
    assert plan.max_tokens == (3900 - CONTEXT_PROMPT_TOKENS + 1 if vary == "context" else make_plan(vary).max_tokens)


def test_a_small_server_scales_the_streams_max_tokens_and_refuses_what_cannot_run():
    plan = make_plan("concurrency", max_model_len=256)
    assert plan.max_tokens == 256 - 32 - BACKGROUND_PROMPT_TOKENS and plan.values == DEFAULT_VALUES["concurrency"]
    assert plan.scaled == ("max-tokens 256 → 24 to fit max_model_len 256 (32 tokens kept free)",)
    with pytest.raises(ValueError, match="interference needs at least 64"):
        make_plan("interference", max_model_len=256)
    with pytest.raises(ValueError, match="context needs at least 288"):
        make_plan("context", max_model_len=256)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("prompt-tokens", [200, 8000], 64), "prompt tokens 8,000 cannot fit: at most 3,904 with max-tokens 64 to fit max_model_len 4,096"),
        (("prefix", [1000, 3950]), "prefix tokens 3,950 cannot fit: at most 3,912 with max-tokens 8"),
        (("interference", [4000]), "long prompt tokens 4,000 cannot fit: at most 3,967"),
        (("context", [300, 4300]), "positions 4,300 cannot fit: at most 3,967"),
        (("concurrency", [1, 2], 4000), "max-tokens 4,000 cannot fit after a 200-token prompt: at most 3,768"),
        (("interference", None, 3800), "max-tokens 3,800 cannot fit after a 200-token prompt"),
        (("prompt-tokens", None, 5000), "prompt tokens 200, 500, 1,000, 2,000 cannot fit: at most 0 with max-tokens 5,000"),
    ],
)
def test_values_or_max_tokens_given_that_cannot_fit_are_refused_in_one_line(args, words):
    with pytest.raises(ValueError) as caught:
        make_plan(*args, max_model_len=4096)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_values_given_that_fit_are_kept_exactly_and_an_unknown_length_fits_nothing():
    assert make_plan("prompt-tokens", [200, 3904], 64, max_model_len=4096) == make_plan("prompt-tokens", [200, 3904], 64)
    assert make_plan("interference", [3967], max_model_len=4096).values == (3967,)
    assert make_plan("context", max_model_len=None) == make_plan("context")
    assert fit_margin(4096) == 128 and fit_margin(512) == 32 and fit_margin(131072) == 4096


def test_requests_timed_in_bursts_are_left_out_of_rows_and_the_finding_says_so():
    def timing(ttft, burst=None):
        return RequestTiming(ok=True, t_sent_unix=0.0, token_offsets_s=(ttft, ttft + 0.01, ttft + 0.02),
                             prompt_tokens=200, output_tokens=3, burst=burst)

    clumped = timing(0.9, burst="63 of 63 gaps under 0.2 ms: the client read in clumps")
    short = prompt_length_row(200, [timing(0.010), clumped])
    long = prompt_length_row(2000, [timing(0.080)])
    assert short["ttft_s"] == 0.010 and short["n"] == 1 and short["bursts"] == 1  # not the clumped 0.9 s
    line = finding("prompt-tokens", [short, long], bursts=1)
    assert line.startswith("TTFT ×8.0 from 200 to 2,000 tokens")
    assert line.endswith("(1 request timed delivery, not generation, left out)")
    assert "left out" not in finding("prompt-tokens", [short, long])
