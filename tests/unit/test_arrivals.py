"""The gamma arrival process and its pacing: vLLM's schedule at a constant rate, a dial that turns mid-run."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from tui.core.measure.arrivals import Pacer, unit_gap, unit_schedule


def gaps_of(times: list[float]) -> list[float]:
    return [b - a for a, b in zip([0.0, *times], times)]


@pytest.mark.parametrize("burstiness", [0.5, 1.0, 4.0])
def test_gaps_have_mean_one_and_the_gamma_spread(burstiness):
    rng = random.Random(7)
    gaps = [unit_gap(burstiness, rng) for _ in range(20_000)]
    # Gamma(b, 1/b): mean 1, coefficient of variation 1/sqrt(b). 20k samples: a few % is many sigmas.
    assert statistics.fmean(gaps) == pytest.approx(1.0, rel=0.05)
    assert statistics.stdev(gaps) == pytest.approx(1 / math.sqrt(burstiness), rel=0.08)


def test_poisson_gaps_are_exponential():
    rng = random.Random(11)
    gaps = [unit_gap(1.0, rng) for _ in range(20_000)]
    below_mean = sum(g < 1.0 for g in gaps) / len(gaps)
    assert below_mean == pytest.approx(1 - math.exp(-1), abs=0.02)  # 0.632 for an exponential, 0.5 for anything symmetric


def test_infinite_burstiness_is_a_constant_gap():
    assert unit_schedule(5, math.inf, random.Random(1)) == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_bad_burstiness_is_refused():
    with pytest.raises(ValueError):
        unit_gap(0.0, random.Random(1))


@pytest.mark.parametrize("n", [1, 2, 50, 1000])
def test_schedule_is_rescaled_to_end_at_exactly_n(n):
    """vLLM rescales the cumulative delays so the last request goes at N / rate (here N at unit rate)."""
    times = unit_schedule(n, 1.0, random.Random(n))
    assert len(times) == n
    assert times[-1] == pytest.approx(n, rel=1e-12)
    assert all(b >= a for a, b in zip(times, times[1:]))
    assert times[0] > 0  # the first request too waits one gap, as in vLLM


def test_rescale_only_stretches_the_drawn_gaps():
    """The rescaled schedule is the raw cumulative draw times one factor, and that factor is near 1."""
    raw_rng, rng = random.Random(3), random.Random(3)
    raw = [unit_gap(1.0, raw_rng) for _ in range(500)]
    gaps = gaps_of(unit_schedule(500, 1.0, rng))
    factors = [g / r for g, r in zip(gaps, raw)]
    assert max(factors) == pytest.approx(min(factors), rel=1e-9)
    assert factors[0] == pytest.approx(500 / sum(raw))
    assert factors[0] == pytest.approx(1.0, abs=0.15)  # the drift vLLM removes is small


def test_same_seed_same_schedule():
    assert unit_schedule(20, 1.0, random.Random(42)) == unit_schedule(20, 1.0, random.Random(42))
    assert unit_schedule(20, 1.0, random.Random(42)) != unit_schedule(20, 1.0, random.Random(43))


def test_pacer_at_a_constant_rate_is_start_plus_unit_over_rate():
    pacer = Pacer(start_s=100.0, rate=4.0)
    assert pacer.due_at(2.0) == pytest.approx(100.5)
    assert pacer.due_at(8.0) == pytest.approx(102.0)


def test_pacer_finishes_the_gap_under_way_at_the_new_rate():
    pacer = Pacer(start_s=0.0, rate=1.0)
    # At t=0.5 half of the unit gap to u=1 has passed; at 10/s the other half takes 0.05 s.
    pacer.set_rate(0.5, 10.0, next_unit=1.0)
    assert pacer.due_at(1.0) == pytest.approx(0.55)
    assert pacer.due_at(2.0) == pytest.approx(0.65)


def test_pacer_paused_and_infinite():
    pacer = Pacer(start_s=0.0, rate=0.0)
    assert pacer.due_at(0.1) == math.inf
    pacer.set_rate(3.0, math.inf, next_unit=0.1)
    assert pacer.due_at(5.0) == -math.inf
    # Back from infinite rate: the next request is due now, the following ones one gap apart.
    pacer.set_rate(4.0, 2.0, next_unit=7.0)
    assert pacer.due_at(7.0) == pytest.approx(4.0)
    assert pacer.due_at(8.0) == pytest.approx(4.5)


def test_pacer_behind_schedule_restarts_instead_of_bursting():
    pacer = Pacer(start_s=0.0, rate=1.0)
    pacer.set_rate(10.0, 1.0, next_unit=3.0)  # at t=10 unit time is 10, but request u=3 was never sent
    assert pacer.due_at(3.0) == pytest.approx(10.0)
    assert pacer.due_at(4.0) == pytest.approx(11.0)


@pytest.mark.parametrize("rate", [-1.0, math.nan])
def test_pacer_refuses_bad_rates(rate):
    with pytest.raises(ValueError):
        Pacer(0.0, rate)
