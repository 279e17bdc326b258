"""The speculation experiment's rows and finding: a gain is "better" only when the two setups' intervals part."""

from __future__ import annotations

import random

import pytest

from tui.core.experiments.findings import finding, finding_figures
from tui.core.experiments.plans import make_plan
from tui.core.experiments.speculation import setups, speculation_row
from tui.core.measure.records import RequestTiming

OFF, ON = setups()


def stream(step_s: float, tokens_a_chunk: tuple[int, ...], seed: int, jitter: float = 0.02) -> RequestTiming:
    """A stream whose chunks come a step apart (± jitter), each carrying the tokens given in turn (1 first)."""
    rng = random.Random(seed)
    sizes = [1] + [tokens_a_chunk[i % len(tokens_a_chunk)] for i in range(40)]
    offsets = [0.01]
    for _ in sizes[1:]:
        offsets.append(offsets[-1] + step_s * (1 + jitter * (rng.random() - 0.5)))
    return RequestTiming(ok=True, t_sent_unix=0.0, token_offsets_s=tuple(offsets), output_tokens=sum(sizes),
                         tokens_per_chunk=tuple(sizes) if any(s != 1 for s in sizes) else None)


def rows_for(batches: dict[int, tuple[float, float, tuple[int, ...]]], sim_lag_s: dict[int, float] | None = None,
             ) -> list[dict]:
    """{batch: (step off, step on, tokens a chunk on)} → the experiment's rows, two rounds of two streams each; the
    simulator's emission lag p99 at each batch where `sim_lag_s` gives one (the same both ways)."""
    rows = []
    for setup in (OFF, ON):
        for streams, (off_s, on_s, sizes) in batches.items():
            step, chunked = (off_s, (1,)) if setup is OFF else (on_s, sizes)
            rounds = [[stream(step, chunked, seed=100 * r + i) for i in range(2)] for r in range(2)]
            rows.append(speculation_row(setup, streams, rounds, (sim_lag_s or {}).get(streams, 0.0002)))
    return rows


def test_the_gain_at_batch_1_and_the_loss_at_32_are_sure_and_said():
    # batch 1: a step a little longer, 2.5 tokens a step; batch 32: compute bound, a step 4× as long for 2.5 tokens
    rows = rows_for({1: (0.005, 0.0052, (2, 3)), 8: (0.0055, 0.0058, (2, 3)), 32: (0.006, 0.024, (2, 3))})
    on_1 = next(r for r in rows if r["setup_key"] == "on" and r["streams"] == 1)
    assert on_1["tokens_per_chunk"] == pytest.approx(101 / 41) and on_1["decode_tok_s"] == pytest.approx(
        1 / on_1["itl_mean_s"])
    line = finding("speculation", rows)
    assert line.startswith("speculation ×2.40 at batch 1, sure: [×")
    assert "×0.62 at batch 32, sure" in line and line.endswith("worth it up to batch 8, a loss from batch 32")
    figures = finding_figures("speculation", rows)
    assert [f["verdict"] for f in figures] == ["better", "better", "worse"]
    assert all(f["ci_low"] <= f["factor"] <= f["ci_high"] for f in figures)


def test_a_tie_is_not_called_a_gain():
    rows = rows_for({1: (0.005, 0.0125, (2, 3))})  # 2.5 tokens a step, 2.5× the step: the same rate
    line = finding("speculation", rows)
    assert "at batch 1, tie" in line and "worth it" not in line


def test_the_plan_runs_batches_1_8_32_128_with_no_server_to_fit():
    plan = make_plan("speculation")
    assert plan.values == (1, 8, 32, 128) and plan.streams == 128 and plan.max_tokens == 128
    with pytest.raises(ValueError, match="at most 256 streams"):
        make_plan("speculation", [512])


def test_a_batch_the_simulator_fell_behind_at_is_marked_and_kept_out_of_the_finding():
    # batch 128 timed this machine: the simulator wrote its chunks 31 ms late (p99), so its figures are the CPU's
    rows = rows_for({1: (0.005, 0.0052, (2, 3)), 128: (0.033, 0.0128, (2, 3))}, sim_lag_s={128: 0.031})
    behind = [r for r in rows if r["streams"] == 128]
    assert all(r["sim_behind"] and r["intervals"]["itl_mean_s"]["ci"] is None for r in behind)
    assert all("fell behind" in r["intervals"]["decode_tok_s"]["reason"] for r in behind)
    assert not any(r["sim_behind"] for r in rows if r["streams"] == 1)
    line = finding("speculation", rows)
    assert "at batch 128" not in line.split(" (")[0], "no verdict at a batch the simulator could not keep up with"
    assert line.endswith("worth it at every batch measured (batch 128 left out: the simulator fell behind its clock, "
                         "lag p99 31 ms, this machine's CPU, not the engine; slowed, PHASETOP_SIM__TIME_SCALE=4, it keeps up)")
    assert [f["streams"] for f in finding_figures("speculation", rows)] == [1]
