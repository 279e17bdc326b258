"""The core's parsers of server input, fed anything (hypothesis, bounded): each returns what it promises or
raises its one documented error, never anything else. (Run files, identity documents, stream chunks and
statistics have theirs beside their other tests.)"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tui.core.serving.command_flags import command_flags
from tui.core.telemetry.metric_names import read_scrape
from tui.core.telemetry.promstats import histogram_quantile
from tui.core.telemetry.slots import read_slots, slots_line
from tui.core.measure.sse import LineSplitter, sse_field

BOUNDED = settings(max_examples=300, deadline=None)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=30,
)
METRIC_LINE = st.one_of(
    st.text(max_size=80),
    st.builds(lambda name, label, value: f'{name}{{model_name="{label}"}} {value}',
              st.sampled_from(["vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:time_to_first_token_seconds_bucket"]),
              st.text(alphabet=st.characters(blacklist_characters='"\\\n'), max_size=20),
              st.one_of(st.floats(), st.sampled_from(["NaN", "+Inf", "-Inf", "1e308", "x"]))),
)


@BOUNDED
@given(st.binary(max_size=300), st.lists(st.integers(0, 300), max_size=6))
def test_line_splitting_does_not_depend_on_where_reads_cut(data, cuts):
    whole = LineSplitter()
    expected = whole.feed(data)
    pieces = LineSplitter()
    got = []
    for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), len(data)]):
        got += pieces.feed(data[a:b])
    assert got == expected and pieces.pending == whole.pending


@BOUNDED
@given(st.binary(max_size=100))
def test_an_sse_line_is_a_field_or_nothing(line):
    field = sse_field(line)
    assert field is None or (isinstance(field[0], bytes) and isinstance(field[1], bytes))


@BOUNDED
@given(st.lists(METRIC_LINE, max_size=8))
def test_any_metrics_text_is_a_reading_or_a_value_error(lines):
    try:
        read_scrape("\n".join(lines) + "\n", 1.0, 1.0)
    except ValueError:
        pass


@BOUNDED
@given(st.floats(0, 1), st.lists(st.tuples(st.floats(), st.floats()), max_size=6))
def test_a_histogram_quantile_is_a_number_or_none(q, buckets):
    value = histogram_quantile(q, sorted(buckets, key=lambda b: (math.isnan(b[0]), b[0])))
    assert value is None or isinstance(value, float)


@BOUNDED
@given(JSON)
def test_llamacpp_slots_are_read_or_refused_as_none(body):
    slots = read_slots(body)
    if slots is not None:
        assert isinstance(slots_line(slots), str)


@BOUNDED
@given(st.lists(st.text(max_size=20), max_size=10))
def test_any_command_line_gives_its_flags(argv):
    flags = command_flags(argv)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in flags.items())
