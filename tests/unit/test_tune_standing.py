"""Where tune's settings stand: the leader, the runner-up, and whether the lead is sure."""

from __future__ import annotations

import random

from tui.core.serving.tune import OBJECTIVES, standing
from tui.core.measure.uncertainty import NOT_ENOUGH, TIE


def requests(gap_s: float, seed: int, n: int = 20) -> list[dict]:
    """n requests a second apart (each its own draw), 50 gaps each around `gap_s`."""
    draw = random.Random(seed)
    return [{"ok": True, "t_sent_unix": 1000.0 + k, "ttft_s": 0.02, "itl_s": [gap_s + draw.expovariate(4000) for _ in range(50)]}
            for k in range(n)]


def figures(reqs: list[dict]) -> dict:
    gaps = sorted(g for r in reqs for g in r["itl_s"])
    return {"itl_s": {"p50": gaps[len(gaps) // 2]}, "output_throughput": 100.0}


def test_a_clear_lead_holds_an_even_one_is_a_tie_and_one_setting_leads_alone():
    objective = OBJECTIVES["itl-p50"]
    fast, slow, same = requests(0.010, 1), requests(0.012, 2), requests(0.010, 3)
    where = standing([figures(slow), figures(fast)], [slow, fast], [[], []], objective)
    assert (where.leader, where.runner_up, where.separated) == (1, 0, True)
    even = standing([figures(fast), figures(same)], [fast, same], [[], []], objective)
    assert even.judged.verdict == TIE and even.settled and not even.separated
    alone = standing([None, figures(fast)], [[], fast], [[], []], objective)
    assert (alone.leader, alone.runner_up, alone.separated) == (1, None, True)


def test_a_figure_a_round_has_once_needs_rounds():
    objective = OBJECTIVES["throughput"]
    where = standing([{"output_throughput": 100.0}, {"output_throughput": 120.0}], [[], []], [[100.0], [120.0]], objective)
    assert where.leader == 1 and where.judged.verdict == NOT_ENOUGH and where.judged.more_requests == 4
