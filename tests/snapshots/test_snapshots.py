"""SVG snapshots of the main screen on a recorded feed: fixed size, fixed theme, no workers, no clock.

Update with `python -m pytest tests/snapshots --snapshot-update` only after looking at the report.
"""

from functools import partial

from tests.snapshots.recorded import make_app, play


def test_live_view_mid_stream_long_and_short(snap_compare):
    assert snap_compare(make_app(), terminal_size=(120, 36), run_before=play)


def test_server_down(snap_compare):
    assert snap_compare(make_app(), terminal_size=(120, 36), run_before=partial(play, down=True))


def test_help_screen(snap_compare):
    assert snap_compare(make_app(), terminal_size=(120, 36), run_before=play, press=["question_mark"])


def test_narrow_80x24(snap_compare):
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=play)


async def play_then_tab_to_the_last_pane(pilot):
    await play(pilot)
    for _ in range(20):
        if pilot.app.focused.id == "gpu-pane":
            break
        await pilot.press("tab")
        await pilot.pause()


def test_narrow_80x24_scrolled_to_the_last_pane(snap_compare):
    """The stacked panes scroll under the status line; the footer keeps s, ? and q."""
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=play_then_tab_to_the_last_pane)


def test_metrics_charts_160x45(snap_compare):
    """Room for the server's metrics as charts of the two minutes before; the GPU/host pane stays text."""
    assert snap_compare(make_app(), terminal_size=(160, 45), run_before=partial(play, history=True))


def test_metrics_and_bandwidth_charts_200x60(snap_compare):
    """Room for the GPU's measured bandwidth against its peak too, under its figures."""
    assert snap_compare(make_app(), terminal_size=(200, 60), run_before=partial(play, history=True))
