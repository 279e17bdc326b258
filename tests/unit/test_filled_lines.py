"""Lines broken between whole pieces: the fleet's pool line at 80 columns keeps each figure with its unit."""

from hypothesis import given
from hypothesis import strategies as st

from tui.core.filled import filled
from tui.core.fleet.instances import Latency, Pool
from tui.core.fleet.text import pool_line

POOL = Pool(role="decode", instances=("a:8000", "b:8000"), running=12, waiting=3, kv_cache_usage=0.4,
            prompt_tok_s=1234.0, generation_tok_s=6.5, ttft=Latency(p50_s=0.05, p99_s=0.120),
            itl=Latency(p50_s=0.005, p99_s=0.0123))


def test_the_pool_line_at_80_columns_breaks_between_figures_never_inside_one():
    one = pool_line(POOL)
    assert "\n" not in one and len(one) > 76  # too long for an 80-column pane (76 inside its border and padding)
    lines = pool_line(POOL, 76).split("\n")
    assert len(lines) == 2 and all(len(line) <= 76 for line in lines)
    assert " ".join(lines) == one, "the same figures, in order, broken only at a space between two of them"
    assert not any(line.startswith("tok/s") for line in lines)
    assert all(line.endswith(",") for line in lines[:-1]), "a broken line ends on its comma"


@given(st.lists(st.text(alphabet="ab", min_size=1, max_size=9), min_size=1, max_size=12), st.integers(9, 40))
def test_every_line_fits_and_every_piece_is_whole(words, width):
    lines = filled([(w, " ") for w in words], width).split("\n")
    assert all(len(line) <= width for line in lines)
    assert [w for line in lines for w in line.split(" ")] == words
