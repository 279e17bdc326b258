"""The timeline's two views against the simulator, at three terminal sizes: short then long compares in
aligned view, 8 at once gets 8 lanes in wall clock, and `v` switches with the pane's title naming the view.

A workload is sent once and the terminal resized to each size in turn (`at_size`): the drawing is the same
function of the lanes and the chart's size whether the app started at that size or was resized to it, and one
workload instead of three keeps the suite's time on what differs."""

from pathlib import Path

import pytest
from textual.app import App, ComposeResult

import tui.app
from tests.app.harness import completed, rendered, send, settings, show_on_pane, started, text_of, wait_for
from tui.app.app import PhasetopApp
from tui.app.widgets.timeline_pane import (
    AXIS_ROWS,
    BURST_MARK,
    TimelinePane,
    TimelinePlot,
)
from tui.core.measure.gaps import UNKNOWN
from tui.core.view.lane_cells import DECODE, GAP_KINDS
from tui.core.measure.records import RequestTiming
from tui.core.view.timeline import ALIGNED, WALL_CLOCK

TCSS = Path(tui.app.__file__).parent / "phasetop.tcss"
SIZES = [(80, 24), (120, 40), (200, 50)]


async def at_size(pilot, app, size) -> None:
    """Resize the terminal to `size` and wait for the chart's replot at it (a first size: nothing to wait for)."""
    if tuple(app.size) == tuple(size):
        return
    pane = app.screen.query_one(TimelinePane)
    before = pane.drawn
    await pilot.resize_terminal(*size)
    await wait_for(pilot, lambda: tuple(app.size) == tuple(size) and pane.drawn is not before, what=f"replotted at {size}")


async def drawn_with(pilot, pane, lanes):
    """The layout once the chart has drawn `lanes` finished lanes (a replot can trail the last token)."""
    await wait_for(pilot, lambda: pane.drawn is not None and len(pane.drawn.rows) + pane.drawn.hidden + pane.drawn.newer == lanes
                   and all(row.lane.token_s and row.ticks for row in pane.drawn.rows[-1:]))
    await pilot.pause(0.4)
    return pane.drawn


@pytest.mark.timing  # a ratio of prefills; and on a busy box the client-busy line takes a row at 80x24
async def test_short_then_long_compares_prefill_in_aligned_view(sim_url):
    seen = []
    app = PhasetopApp(settings(), sim_url, None, None)
    async with app.run_test(size=SIZES[0], message_hook=seen.append) as pilot:
        await started(pilot, seen)
        pane = app.screen.query_one(TimelinePane)
        # Two shorts: the first on a fresh simulator pays its cold start (tens of ms on a loaded CI box).
        await send(pilot, seen, "1", 1)
        await send(pilot, seen, "1", 2)
        await send(pilot, seen, "2", 3)
        ttft_ms = [m.timing.ttft_s * 1e3 for m in completed(seen)][1:]
        for size in SIZES:
            await at_size(pilot, app, size)
            drawn = await drawn_with(pilot, pane, 3)
            assert drawn.view == ALIGNED and pane.view == ALIGNED and "aligned" in str(pane.border_title)
            assert drawn.hidden == 0, "every lane fits"
            _, short, long = drawn.rows
            assert short.lane.label == "short 200" and long.lane.label == "long 2000"
            assert short.sent_s == long.sent_s == 0.0 == drawn.x_min
            assert drawn.span_cells(short) >= 1.0
            ratio = drawn.span_cells(long) / drawn.span_cells(short)
            # ≥ 5× as the issue asks, unless this box's load itself brought the TTFTs closer (a short's ~10 ms can
            # read 20 on a loaded CI box): then the drawing still keeps their proportion. At 80 columns the axis has
            # ~60 cells for 0.7 s, so a 76 ms prefill is 5–6.5 of them; a loaded box that stretches the decode (the
            # axis) has left it 4.8 against the short's one-cell minimum.
            ttft_ratio = long.lane.first_token_s / short.lane.first_token_s
            floor = 5 if size[0] >= 120 else 4
            assert ratio >= min(floor, 0.8 * ttft_ratio), (
                f"at {size}: long prefill {drawn.span_cells(long):.1f} cells, short {drawn.span_cells(short):.1f}; TTFTs ×{ttft_ratio:.1f}")
            longest = max(row.lane.token_s[-1] for row in drawn.rows)
            assert drawn.x_max == pytest.approx(longest), "the axis ends at the longest lane"
            assert drawn.cells < app.screen.query_one(TimelinePlot).size.width
            assert [row.label for row in drawn.rows[1:]] == [f"short 200 {ttft_ms[0]:.1f} ms" if ttft_ms[0] < 10 else
                                                             f"short 200 {ttft_ms[0]:,.0f} ms", f"long 2000 {ttft_ms[1]:,.0f} ms"]
        await pilot.press("q")


async def test_eight_at_once_gets_eight_lanes_in_wall_clock_and_v_switches(sim_url):
    seen = []
    app = PhasetopApp(settings(), sim_url, None, None)
    async with app.run_test(size=SIZES[0], message_hook=seen.append) as pilot:
        await started(pilot, seen)
        pane = app.screen.query_one(TimelinePane)
        await send(pilot, seen, "1", 1)
        assert pane.view == ALIGNED
        await send(pilot, seen, "4", 9)
        await drawn_with(pilot, pane, 9)
        plot = app.screen.query_one(TimelinePlot)

        def in_batch() -> list:
            return [row for row in pane.drawn.rows if row.lane.label.startswith("8 at once")]

        for size in SIZES:
            await at_size(pilot, app, size)
            drawn = await drawn_with(pilot, pane, 9)
            assert drawn.view == WALL_CLOCK and "wall clock" in str(pane.border_title), size
            # The newest lanes that fit (a busy box's client-busy line takes a row, and the chart redraws at its height).
            await wait_for(pilot, lambda: len(in_batch()) == min(8, plot.size.height - AXIS_ROWS),
                           what=lambda: f"the newest lanes fit at {size}: the chart {plot.size}, the lanes drawn "
                                        f"{[row.lane.label for row in pane.drawn.rows]}, {pane.drawn.hidden} hidden")
            drawn, rows, batch = pane.drawn, plot.size.height - AXIS_ROWS, in_batch()
            assert len(drawn.rows) + drawn.hidden == 9, "every lane of the batch is kept, and the short before it"
            assert all(row.prefill is not None and row.ticks for row in batch)
            assert drawn.cells < plot.size.width
            if rows >= 8:
                assert [row.lane.label for row in batch] == [f"8 at once {n}" for n in range(1, 9)]
            if drawn.hidden:
                assert f"+{drawn.hidden} older (↑)" in str(pane.border_subtitle)
            else:
                assert "older" not in str(pane.border_subtitle)
            assert "prefill" in str(pane.border_subtitle) and "decode" in str(pane.border_subtitle), "the legend"
            if len(batch) == 8:  # the batch's first send is on the axis: it starts there, not at the short before
                assert drawn.x_min == pytest.approx(min(row.sent_s for row in batch))
            # Every cell says what it holds: tokens, decoding through, or a long gap with whose it is; none is a gap
            # nobody owns (an empty cell is a silence longer than the lane's typical gap, and is counted apart).
            kinds = [cell.kind for row in batch for cell in row.cells]
            assert kinds.count(DECODE) > len(batch) * 10
            assert GAP_KINDS[UNKNOWN] not in kinds, [gap.line() for row in batch for gap in row.lane.gaps]
            await pilot.press("v")
            await wait_for(pilot, lambda: pane.drawn.view == ALIGNED, what=f"aligned at {size}")
            assert pane.view == ALIGNED and "aligned" in str(pane.border_title)
            assert all(row.sent_s == 0.0 for row in pane.drawn.rows)
            await pilot.press("v")
            await wait_for(pilot, lambda: pane.drawn.view == WALL_CLOCK, what=f"wall clock again at {size}")
            assert "wall clock" in str(pane.border_title)
        await pilot.press("q")


class _Host(App):
    CSS_PATH = TCSS

    def compose(self) -> ComposeResult:
        yield TimelinePane(id="timeline-pane", classes="pane")


async def test_thirty_two_streams_are_kept_whole_and_a_burst_is_in_the_legend():
    """A 32-stream batch after 10 singles: all 32 kept (past the lane limit's older ones), the newest that
    fit drawn, the rest counted; a flagged lane drawn with the burst mark, which the legend names."""
    singles = [RequestTiming(True, 100.0 + i, tuple(0.01 + j * 0.005 for j in range(20)), output_tokens=20) for i in range(10)]
    batch = [RequestTiming(True, 200.0 + i * 0.001, tuple(0.05 + j * 0.005 for j in range(20)),
                           burst="arrived in clumps" if i == 31 else None) for i in range(32)]
    app = _Host()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(TimelinePane)
        show_on_pane(pane, singles + batch, [f"short {i}" for i in range(10)] + [f"stream {i + 1}" for i in range(32)])
        await pilot.pause(0.5)
        drawn = pane.drawn
        plot = app.query_one(TimelinePlot)
        assert len(drawn.rows) + drawn.hidden == 32 and len(drawn.rows) == plot.size.height - AXIS_ROWS
        assert drawn.rows[-1].lane.label == "stream 32" and drawn.view == WALL_CLOCK
        subtitle = str(pane.border_subtitle)
        assert f"+{drawn.hidden} older (↑)" in subtitle and f"{BURST_MARK} delivery burst" in subtitle
        assert BURST_MARK in rendered(plot)
        show_on_pane(pane, singles[:2])
        await pilot.pause(0.5)
        assert pane.drawn.view == ALIGNED and "older" not in str(pane.border_subtitle)
        assert "burst" not in str(pane.border_subtitle)


async def test_the_gaps_line_does_not_depend_on_the_lanes_that_fit():
    """Only an older lane has a long gap: at every height the gaps line counts it (lanes reachable with the arrows
    count, drawn or not), so showing the line, which takes a row from the chart, never hides the gap that showed it;
    the chart settles at each height (it once redrew some 60 times a second, the line coming and going)."""
    offsets = [0.05 + j * 0.01 for j in range(60)]
    held = offsets[:30] + [offset + 0.3 for offset in offsets[30:]]
    streams = [RequestTiming(True, 100.0 + i * 0.001, tuple(held if i == 3 else offsets), output_tokens=60)
               for i in range(8)]
    app = _Host()
    async with app.run_test(size=(80, 9)) as pilot:
        pane = app.query_one(TimelinePane)
        plot = app.query_one(TimelinePlot)
        show_on_pane(pane, streams)
        for height in range(9, 16):
            await pilot.resize_terminal(80, height)
            await pilot.pause(0.3)
            drawn = pane.drawn
            await pilot.pause(0.3)
            assert pane.drawn is drawn, f"height {height}: the chart settles"
            assert len(drawn.rows) == min(8, plot.size.height - AXIS_ROWS), height
            assert text_of(app, "#timeline-gaps").startswith("1 gap over"), height


async def test_thirty_two_streams_get_thirty_two_lanes_each_reachable_with_the_arrows(sim_url):
    """32 streams at once: 32 lanes kept; those the pane has no rows for are counted on its border, and the arrows
    scroll the lanes drawn so the selected one is always among them, from the last stream up to the first (and, at
    the next size, back down)."""
    seen = []
    app = PhasetopApp(settings(), sim_url, None, None)
    async with app.run_test(size=SIZES[0], message_hook=seen.append) as pilot:
        await started(pilot, seen)
        screen = app.screen
        await pilot.press("5")  # the preset: 32 streams at once
        await wait_for(pilot, lambda: len(completed(seen)) == 32, 60)
        pane = screen.query_one(TimelinePane)
        await drawn_with(pilot, pane, 32)
        plot = screen.query_one(TimelinePlot)
        plot.focus()  # the arrows are the screen's while no text box has them

        def selected() -> list[str]:
            return [row.lane.label for row in pane.drawn.rows if row.lane.selected]

        # As many lanes as the chart has rows (a busy box's client-busy line takes one, and the chart redraws).
        await wait_for(pilot, lambda: len(pane.drawn.rows) == min(32, plot.size.height - AXIS_ROWS), what=lambda: f"lanes fill the rows ({len(pane.drawn.rows)} drawn, {plot.size.height} rows)")
        assert pane.drawn.rows[-1].lane.label == "32 at once 32"
        for turn, size in enumerate(SIZES):
            await at_size(pilot, app, size)
            await wait_for(pilot, lambda: len(pane.drawn.rows) == min(32, plot.size.height - AXIS_ROWS),
                           what=f"lanes fill the rows at {size}")
            key, lanes, end = ("up", range(31, 0, -1), 1) if turn % 2 == 0 else ("down", range(2, 33), 32)
            for n in lanes:  # every lane selected in turn, each drawn
                await pilot.press(key)
                await wait_for(pilot, lambda n=n: selected() == [f"32 at once {n}"], 5, what=f"lane {n} selected and drawn at {size}")
            edge = pane.drawn
            hidden_past_edge, beyond, arrow = ((edge.newer, "newer", "↓") if key == "up" else (edge.hidden, "older", "↑"))
            assert (edge.rows[0] if key == "up" else edge.rows[-1]).lane.label == f"32 at once {end}"
            assert (edge.hidden if key == "up" else edge.newer) == 0
            assert hidden_past_edge == 32 - len(edge.rows)
            if hidden_past_edge:  # the legend follows the plot's draw by one message (the pane takes its Drawn)
                said = f"+{hidden_past_edge} {beyond} ({arrow})"
                await wait_for(pilot, lambda: said in str(pane.border_subtitle), 5,
                               what=lambda: f"{said!r} in the legend: {pane.border_subtitle!r}")
            assert str(screen.query_one("#timeline-figures").render()).startswith(f"32 at once {end}: TTFT")
        await pilot.press("q")


async def test_a_long_prompt_among_eight_streams_shows_on_the_wall_clock_and_stalls_them(sim_url):
    """8 at once, then the long prompt while they decode: the timeline turns to wall clock (a single send among
    running requests), the long lane is drawn beside the streams, and their decode stalls while it prefills;
    no cell of the 8 lanes is a gap nobody owns (an empty cell is a silence longer than the lane's typical gap)."""
    seen = []
    app = PhasetopApp(settings(), sim_url, None, None)
    async with app.run_test(size=SIZES[0], message_hook=seen.append) as pilot:
        await started(pilot, seen)
        screen = app.screen
        await pilot.press("4")
        await wait_for(pilot, lambda: len(screen.timings) == 8 and all(len(t.token_offsets_s) >= 8 for t in screen.timings))
        await pilot.press("2")
        await wait_for(pilot, lambda: len(completed(seen)) == 9, 60)
        streams = [m.timing for m in completed(seen) if m.timing.prompt_tokens == 200]
        [long_timing] = [m.timing for m in completed(seen) if m.timing.prompt_tokens == 2000]
        # Each stream was still decoding when the long prompt was sent, and its longest gap is the long's prefill.
        assert all(t.t_sent_unix + t.e2e_s > long_timing.t_sent_unix for t in streams)
        assert all(max(t.itl_s) >= 0.5 * long_timing.ttft_s for t in streams), "a stall while it prefilled"
        pane = screen.query_one(TimelinePane)
        for size in (*SIZES, (160, 45)):
            await at_size(pilot, app, size)
            drawn = await drawn_with(pilot, pane, 9)
            assert drawn.view == WALL_CLOCK and "wall clock" in str(pane.border_title), size
            long = drawn.rows[-1]
            assert long.lane.label.startswith("long 2000") and long.prefill is not None
            streams_drawn = [row for row in drawn.rows if row.lane.label.startswith("8 at once")]
            assert streams_drawn or size == SIZES[0], f"at {size} the chart has rows for the streams beside the long lane"
            kinds = [cell.kind for row in streams_drawn for cell in row.cells]  # (at 80×24 it may have one row only)
            assert kinds.count(DECODE) >= len(streams_drawn) * 10, size
            assert GAP_KINDS[UNKNOWN] not in kinds, [gap.line() for row in drawn.rows for gap in row.lane.gaps]
        await pilot.press("q")
