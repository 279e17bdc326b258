"""An experiment row's intervals: a percentile's from its data (lopsided where they are, never below zero), shown as
its two ends, kept in JSON as low/high, and where a value has none, the reason said beside the table."""

from __future__ import annotations

import random
import re

import pytest

from tui.core.experiments.columns import COLUMNS, Column, notes_line, table
from tui.core.experiments.rows import concurrency_row
from tui.core.measure.records import RequestTiming
from tui.core.measure.uncertainty import LEVEL, MIN_REQUESTS, interval

SHOWN_INTERVAL = re.compile(r"^(?P<value>[\d,.]+) \[(?P<low>[\d,.]+)…(?P<high>[\d,.]+)\]$")


def heavy_stream(sent: float, rng: random.Random, gaps: int = 200) -> RequestTiming:
    """A stream whose gaps are 5 ms times a Pareto draw (α 1.5): mostly near 5 ms, a few tens of times that."""
    t, offsets = 0.010, []
    for _ in range(gaps + 1):
        offsets.append(t)
        t += 0.005 * rng.paretovariate(1.5)
    return RequestTiming(ok=True, t_sent_unix=sent, token_offsets_s=tuple(offsets), output_tokens=len(offsets))


@pytest.fixture(scope="module")
def heavy_row() -> dict:
    rng = random.Random(3)
    return concurrency_row(4, [[heavy_stream(1000.0 + 0.3 * k, rng) for k in range(4)]])


def shown(row: dict, key: str) -> dict[str, float]:
    column = next(c for c in COLUMNS["concurrency"] if c.key == key)
    match = SHOWN_INTERVAL.match(column.show(row))
    assert match, column.show(row)
    return {k: float(v.replace(",", "")) for k, v in match.groupdict().items()}


def test_a_heavy_tailed_p99_has_an_interval_far_longer_above_it_than_below(heavy_row):
    value, (low, high) = heavy_row["itl_p99_s"], heavy_row["intervals"]["itl_p99_s"]["ci"]
    assert 0 < low <= value <= high
    assert high - value > 2 * (value - low), "the tail reaches up, not down"
    assert high - value > value, "a half-width on both sides would reach below zero"


def test_the_table_shows_the_intervals_ends_never_a_half_width_below_zero(heavy_row):
    p99 = shown(heavy_row, "itl_p99_s")
    assert 0 < p99["low"] <= p99["value"] <= p99["high"]
    assert p99["high"] - p99["value"] > 2 * (p99["value"] - p99["low"])
    assert not any("±" in cell for line in table("concurrency", [heavy_row]).cells for cell in line)


def test_the_32_stream_row_of_the_issue_reads_its_two_ends():
    row = {"itl_p99_s": 0.0111, "intervals": {"itl_p99_s": {"ci": [0.0108, 0.0670], "n": 11, "more": None}}}
    assert Column("itl_p99_s", "ITL p99", 1000.0, "ms").show(row) == "11.1 [10.8…67.0]"


@pytest.mark.parametrize("seed", range(5))
def test_a_percentile_interval_of_skewed_latencies_never_leaves_the_values_measured(seed):
    rng = random.Random(seed)
    latencies = [(rng.lognormvariate(-5, 1.2),) for _ in range(1000)]  # 10 above its p99
    values = sorted(v for (v,) in latencies)
    for stat, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        value = values[round(q * (len(values) - 1))]
        low, high = interval(latencies, stat, value).ci
        assert values[0] <= low <= value <= high <= values[-1], stat


def test_the_json_keeps_the_interval_as_low_and_high_with_its_level(heavy_row):
    kept = heavy_row["intervals"]["itl_p99_s"]
    assert (kept["ci_low"], kept["ci_high"]) == tuple(kept["ci"]) and kept["level"] == LEVEL
    assert kept["reason"] is None


def test_a_value_without_an_interval_says_why():
    rng = random.Random(3)
    one = concurrency_row(1, [[heavy_stream(1000.0, rng, gaps=60)]])
    ttft, p99 = one["intervals"]["ttft_p50_s"], one["intervals"]["itl_p99_s"]
    assert ttft["ci"] is None and ttft["reason"] == f"fewer than {MIN_REQUESTS} draws" and ttft["n"] == 1
    assert p99["ci"] is None and p99["reason"] == f"fewer than {MIN_REQUESTS} draws above p99" and p99["more"] > 0
    assert p99["ci_low"] is None and p99["ci_high"] is None


def test_the_table_marks_each_value_without_an_interval_and_notes_each_reason_once(heavy_row):
    rng = random.Random(3)
    one = concurrency_row(1, [[heavy_stream(1000.0, rng, gaps=60)]])
    shown_table = table("concurrency", [one, heavy_row])
    first, second = shown_table.cells
    assert first[0] == "1" and first[1].endswith("¹") and first[-1].endswith("¹"), "aggregate and TTFT: one draw"
    assert first[4].endswith("²"), "ITL p99 of one stream: too few draws above it"
    assert SHOWN_INTERVAL.match(second[4]), "four streams: an interval"
    assert second[1].endswith("¹"), "one round: one draw of the aggregate"
    assert shown_table.notes == ["¹ fewer than 5 draws", "² fewer than 5 draws above p99"]
    assert notes_line(shown_table.notes) == "no interval: ¹ fewer than 5 draws  ² fewer than 5 draws above p99"
    assert notes_line([]) == ""


def test_a_column_without_intervals_is_never_marked():
    row = {"prompt_tokens": 200, "ttft_s": 0.0066, "decode_tok_s": 207.0, "prefill_tok_s": 30226.0, "itl_p50_s": 0.00495}
    assert table("prompt-tokens", [row]).cells == [["200", "6.60", "207", "30,226", "4.95"]]
    assert table("prompt-tokens", [row]).notes == []
