"""Intervals and verdicts of compared figures: the bootstrap over requests, the verdict rule, and the A/A check
(the same workload twice on the same simulator is no difference) beside an A/B one (a slower one is worse)."""

from __future__ import annotations

import json
import random

import pytest

from tui.cli.main import main
from tui.core.runs.run_record import (
    compare_runs,
    draw_block_of,
    request_figures,
    request_samples,
    run_from_bench_document,
)
from tui.core.measure.uncertainty import BETTER, NOT_ENOUGH, TIE, WORSE, judge, verdict_of

pytestmark = pytest.mark.timing

AA_TRIALS = 20


def streams(n: int, gap_s: float, seed: int, gaps: int = 200) -> list[list[float]]:
    """n requests' gaps: a base interval plus exponential jitter."""
    draw = random.Random(seed)
    return [[gap_s + draw.expovariate(2000) for _ in range(gaps)] for _ in range(n)]


def pooled_p50(clusters: list[list[float]]) -> float:
    values = sorted(v for cluster in clusters for v in cluster)
    return values[len(values) // 2]


def test_a_clear_shift_is_worse_and_its_interval_holds_it():
    before, after = streams(16, 0.010, 1), streams(16, 0.012, 2)
    judged = judge(before, after, "p50", pooled_p50(before), pooled_p50(after), higher_is_better=False)
    assert judged.verdict == WORSE
    low, high = judged.ci
    assert 0 < low < pooled_p50(after) - pooled_p50(before) < high
    assert judge(after, before, "p50", pooled_p50(after), pooled_p50(before), higher_is_better=False).verdict == BETTER


def test_the_same_distribution_twice_is_a_tie_and_the_answer_is_the_same_every_time():
    before, after = streams(16, 0.010, 1), streams(16, 0.010, 2)
    judged = judge(before, after, "p50", pooled_p50(before), pooled_p50(after), higher_is_better=False)
    assert judged.verdict == TIE
    assert judged == judge(before, after, "p50", pooled_p50(before), pooled_p50(after), higher_is_better=False)


def test_a_streams_gaps_are_one_draw_not_many():
    """Two streams, each steady but at its own pace: counted as 400 independent gaps, a p50 would look sure; as two
    requests it cannot be (n = 2 is under the least a verdict needs), and at 12 streams the interval spans the paces."""
    few = [[0.010] * 200, [0.014] * 200]
    assert judge(few, few, "p50", 0.012, 0.012, higher_is_better=False).verdict == NOT_ENOUGH
    twelve = [[0.010] * 200, [0.014] * 200] * 6
    judged = judge(twelve, [[0.011] * 200, [0.015] * 200] * 6, "p50", 0.012, 0.013, higher_is_better=False)
    low, high = judged.ci
    assert high - low >= 0.003, "the interval spans the streams' own spread, not the gaps' (which is zero)"


def test_verdict_rule_needs_zero_excluded_and_a_practical_change():
    assert verdict_of(100.0, 90.0, (-12.0, -8.0), 20, higher_is_better=False) == (BETTER, None)
    assert verdict_of(100.0, 90.0, (-12.0, -8.0), 20, higher_is_better=True) == (WORSE, None)
    assert verdict_of(100.0, 99.0, (-2.0, -0.5), 20, higher_is_better=False) == (TIE, None), "sure, but under 5 %"
    verdict, more = verdict_of(100.0, 90.0, (-20.0, +5.0), 20, higher_is_better=False)
    assert verdict == NOT_ENOUGH and more == 45 - 20, "the upper side must shrink from 15 to 10: 2.25× the requests"
    verdict, more = verdict_of(100.0, 101.0, (-6.0, +8.0), 10, higher_is_better=False)
    assert verdict == NOT_ENOUGH and more > 0


def test_fewer_than_five_requests_a_side_say_how_many_more():
    judged = judge([[0.1]] * 3, [[0.2]] * 8, "p50", 0.1, 0.2, higher_is_better=False)
    assert (judged.verdict, judged.more_requests, judged.ci) == (NOT_ENOUGH, 2, None)


def bench_run(capsys, url: str, name: str, rate: float = 60) -> dict:
    """The A/A workload: Poisson arrivals (the same seed each run), so the requests fall in many draws."""
    code = main(["bench", "--url", url, "--num-prompts", "24", "--request-rate", str(rate), "--prompt-tokens", "64",
                 "--max-tokens", "16", "--seed", "1", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return run_from_bench_document(json.loads(out), name)


def called(comparison: dict) -> list[str]:
    return [f"{f['label']} {f['verdict']}" for f in comparison["figures"] if f["verdict"] in (BETTER, WORSE)]


def test_the_same_workload_twice_on_one_server_is_no_difference_in_nearly_every_trial(sim_url, capsys):
    """bench/aa_rate.py measures the rate over 100 trials (the README's figure); here 20, with a loose bound. Drawn
    request by request instead of in blocks of time, half the trials named a difference."""
    calls = [called(compare_runs(bench_run(capsys, sim_url, "a"), bench_run(capsys, sim_url, "b"))) for _ in range(AA_TRIALS)]
    assert sum(bool(c) for c in calls) <= AA_TRIALS * 0.1, calls


def test_a_server_four_times_slower_is_worse_on_itl_and_decode(sim_url, slow_sim_url, capsys):
    # Arrivals further apart: a slower server's draws are longer blocks of time (5 of its gaps).
    comparison = compare_runs(bench_run(capsys, sim_url, "fast", 20), bench_run(capsys, slow_sim_url, "slow", 20))
    verdicts = {(f["figure"], f["stat"]): f["verdict"] for f in comparison["figures"]}
    assert verdicts[("itl_s", "p50")] == WORSE and verdicts[("decode_tok_s", "p50")] == WORSE, verdicts
    assert verdicts[("ttft_s", "p50")] == WORSE, verdicts
    throughput = next(f for f in comparison["figures"] if f["figure"] == "output_throughput")
    assert throughput["verdict"] == NOT_ENOUGH and throughput["ci_low"] is None, "one value a run: no interval"


def test_requests_sent_together_are_one_draw():
    sent_together = [{"ok": True, "ttft_s": 0.02 + k / 1000, "t_sent_unix": 100.0 + k / 10_000, "itl_s": [0.005] * 4}
                     for k in range(10)]
    def draws(requests: list[dict], name: str) -> list:
        return request_samples(requests, name, draw_block_of(request_figures(requests)))

    assert len(draws(sent_together, "ttft_s")) == 1
    apart = [{**r, "t_sent_unix": 100.0 + k} for k, r in enumerate(sent_together)]
    assert len(draws(apart, "ttft_s")) == 10
    assert len(draws(apart, "itl_s")) == 10, "each stream's gaps end within one block, a second apart"
    judged = compare_runs({"requests": sent_together}, {"requests": sent_together})["figures"][0]
    assert (judged["verdict"], judged["n_before"]) == (NOT_ENOUGH, 1)


@pytest.mark.parametrize("stat", ["p99", "mean"])
def test_every_statistic_has_an_interval_around_its_change(stat):
    before, after = streams(12, 0.010, 3), streams(12, 0.013, 4)
    value = {"p99": lambda c: sorted(v for x in c for v in x)[int(0.99 * sum(map(len, c)))],
             "mean": lambda c: sum(v for x in c for v in x) / sum(map(len, c))}[stat]
    judged = judge(before, after, stat, value(before), value(after), higher_is_better=False)
    low, high = judged.ci
    assert low <= value(after) - value(before) <= high
    assert judged.before_ci[0] <= value(before) <= judged.before_ci[1] + 1e-12
    assert judged.verdict == WORSE


def test_the_worst_gap_is_judged_by_whose_draws_are_worst():
    before, after = streams(12, 0.010, 3), streams(12, 0.013, 4)
    worst = [max(v for x in c for v in x) for c in (before, after)]
    judged = judge(before, after, "max", *worst, higher_is_better=False)
    assert (judged.verdict, judged.ci) == (WORSE, None), "every one of after's streams had a worse gap than before's worst"
    one_worse = streams(11, 0.010, 5) + after[:1]
    assert judge(before, one_worse, "max", worst[0], worst[1], higher_is_better=False).verdict == NOT_ENOUGH, (
        "one stream worse than before's worst: alike runs do that half the time")
    six_worse = streams(6, 0.010, 5) + after[:6]
    assert judge(before, six_worse, "max", worst[0], worst[1], higher_is_better=False).verdict == NOT_ENOUGH, (
        "six: alike runs do that 0.7 % of the time, over the 0.5 % a side a 99 % level allows")
    seven_worse = streams(5, 0.010, 5) + after[:7]
    assert judge(before, seven_worse, "max", worst[0], worst[1], higher_is_better=False).verdict == WORSE, (
        "seven: 0.2 %")
