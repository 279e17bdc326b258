import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.core.measure.stats import percentile, summarize


def test_percentiles_interpolate_linearly_like_numpy():
    samples = [1.0, 2.0, 3.0, 4.0, 10.0]
    summary = summarize(samples)
    assert summary.n == 5
    assert summary.mean == pytest.approx(4.0)
    assert summary.p50 == pytest.approx(3.0)
    # numpy.percentile([1,2,3,4,10], 90) == 7.6 ; 99 -> 9.76
    assert summary.p90 == pytest.approx(7.6)
    assert summary.p99 == pytest.approx(9.76)


def test_order_of_samples_does_not_matter_and_none_is_dropped():
    assert summarize([10.0, None, 1.0, 3.0, 2.0, 4.0]) == summarize([1.0, 2.0, 3.0, 4.0, 10.0])


def test_no_samples_gives_empty_summary():
    summary = summarize([])
    assert summary.n == 0 and summary.p50 is None and summary.mean is None


def test_single_sample_is_every_percentile():
    assert summarize([0.25]).p99 == 0.25


def test_percentile_of_nothing_raises():
    with pytest.raises(ValueError):
        percentile([], 50)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))))
def test_summarize_takes_whatever_a_server_reports(samples):
    """NaN, ±inf and values near 1e308 are what a hostile server may send: never a crash, never a non-finite figure."""
    summary = summarize(samples)
    finite = [s for s in samples if s is not None and math.isfinite(s)]
    assert summary.n == len(finite)
    for figure in (summary.mean, summary.p50, summary.p90, summary.p99):
        assert figure is None if not finite else math.isfinite(figure)
    if finite:
        assert min(finite) <= summary.p50 <= max(finite)
        slack = 1e-9 * max(abs(min(finite)), abs(max(finite)))
        assert min(finite) - slack <= summary.mean <= max(finite) + slack
