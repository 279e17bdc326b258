"""What an 80×24 terminal over SSH must still show, and how the timeline and sparklines draw.

The whole app runs on the recorded feed of the snapshot tests (no server, no workers); the timeline
and the metrics pane also run alone in small host apps with the real .tcss.
"""

from dataclasses import replace
from pathlib import Path

import pytest
from rich.style import Style
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import Sparkline, TextArea

import tui.app
from tests.app.harness import settings, show_on_pane, shows, wait_for
from tests.snapshots.recorded import T0, make_app, metrics, offsets, play
from tui.app.screens.fleet import InstanceScreen
from tui.app.widgets.metrics_pane import MetricsPane
from tui.app.widgets.timeline_pane import AXIS_ROWS, PREFILL_MARK, TimelinePane, TimelinePlot
from tui.core.measure.records import RequestTiming
from tui.core.telemetry.readings import HistogramQuantiles

TCSS = Path(tui.app.__file__).parent / "phasetop.tcss"
SIZE = (80, 24)


def footer_keys(screen) -> dict[str, Region]:
    return {key.key: key.region for key in screen.query("Footer FooterKey")}


async def test_the_fixed_keys_stay_in_the_80_column_footer_whatever_pane_has_focus():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await play(pilot)
        screen = app.screen
        checked = set()
        for _ in range(20):
            if not isinstance(app.focused, TextArea):  # typing there, s ? q are letters, not keys
                await pilot.pause()
                keys = footer_keys(screen)
                palette = keys["ctrl+p"]
                uncovered = Region(0, SIZE[1] - 1, palette.x, 1)  # the palette key is docked on the right
                for key in ("s", "question_mark", "q"):
                    assert uncovered.contains_region(keys[key]), f"{key} cut off: {keys[key]} (room {uncovered})"
                checked.add(app.focused.id)
            if app.focused.id == "gpu-pane":
                break
            await pilot.press("tab")
            await pilot.pause()
        assert {"timeline-pane", "metrics-pane", "gpu-pane"} <= checked


async def test_a_fleet_instances_footer_has_its_way_back_and_the_fixed_keys_in_80_columns():
    """The instance screen is the main screen with "esc Fleet" first: the keys it must show still fit."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await play(pilot)
        app.push_screen(InstanceScreen(settings(), "http://127.0.0.1:1", "http://127.0.0.1:1", "vllm", "a:1"))
        await wait_for(pilot, lambda: shows(app, InstanceScreen) and footer_keys(app.screen).get("ctrl+p", Region()).width,
                       what="the instance screen's footer laid out")
        keys = footer_keys(app.screen)
        uncovered = Region(0, SIZE[1] - 1, keys["ctrl+p"].x, 1)
        for key in ("escape", "s", "question_mark", "q"):
            assert key in keys and uncovered.contains_region(keys[key]), f"{key} cut off: {keys.get(key)}"
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, InstanceScreen)


async def test_the_send_button_lies_inside_the_prompt_pane():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await play(pilot)
        screen = app.screen
        pane = screen.query_one("#prompt-pane")
        send = screen.query_one("#send-typed")
        assert send.region.width > 0
        assert pane.content_region.contains_region(send.region), f"{send.region} outside {pane.content_region}"
        assert Region(0, 0, *SIZE).contains_region(send.region)


async def test_the_status_line_stays_at_the_top_when_the_last_pane_is_focused():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await play(pilot)
        screen = app.screen
        for _ in range(20):
            if app.focused.id == "gpu-pane":
                break
            await pilot.press("tab")
            await pilot.pause()
        assert app.focused.id == "gpu-pane"
        assert screen.query_one("#panes").scroll_offset.y > 0, "the stacked panes scrolled to the last one"
        status = screen.query_one("#status")
        assert status.region.y == 0 and 2 <= status.region.height <= 4
        assert " up " in str(status.render())
        gpu = screen.query_one("#gpu-pane").region
        assert gpu.y >= status.region.bottom and gpu.bottom <= SIZE[1] - 1, "below the status line, above the footer"


# ---- the timeline plot -----------------------------------------------------------------------------


class _TimelineHost(App):
    CSS_PATH = TCSS

    def compose(self) -> ComposeResult:
        yield TimelinePane(id="timeline-pane", classes="pane")


def requests(count: int) -> list[RequestTiming]:
    """`count` requests a third of a second apart, with prefills from 30 to 330 ms."""
    return [RequestTiming(ok=True, t_sent_unix=T0 + i / 3, token_offsets_s=offsets(0.03 + 0.06 * i, 0.01, 30),
                          prompt_tokens=200) for i in range(count)]


def lines(widget) -> list[Strip]:
    return widget.render_lines(Region(0, 0, *widget.size))


@pytest.mark.parametrize("count", [2, 3, 6])
async def test_each_prefill_bar_is_on_its_lanes_row_at_every_plot_height(count):
    """A short plot shows the newest lanes that fit, one row each, every bar on its label's row."""
    labels = [f"lane {i}" for i in range(count)]
    fits = []
    for height in range(9, 27):
        app = _TimelineHost()
        async with app.run_test(size=(80, height)) as pilot:
            pane = app.query_one(TimelinePane)
            show_on_pane(pane, requests(count), labels)
            await pilot.pause()
            plot = app.query_one(TimelinePlot)
            rows = [strip.text for strip in lines(plot)]
            label_rows = {label: i for i, row in enumerate(rows) for label in labels if label in row}
            fit = min(count, plot.size.height - AXIS_ROWS)
            fits.append(fit)
            assert list(label_rows) == labels[-fit:], f"height {height}: the newest {fit} lanes"
            assert len(set(label_rows.values())) == fit, f"height {height}: a row per lane"
            bar_rows = {i for i, row in enumerate(rows) if PREFILL_MARK in row}
            assert bar_rows == set(label_rows.values()), f"height {height}: bars on {bar_rows}, labels {label_rows}"
    assert max(fits) == count, "a tall plot shows every lane"
    if count == 6:
        assert min(fits) < count, "a short plot dropped the oldest lanes"


def cells(strips: list[Strip]) -> list[tuple[str, Style]]:
    return [(char, style) for strip in strips for text, style, _ in strip for char in text]


def contrast(style: Style) -> int:
    fg, bg = style.color.get_truecolor(), style.bgcolor.get_truecolor()
    return sum(abs(a - b) for a, b in zip(fg, bg, strict=True))


async def plot_cells(down: bool) -> list[tuple[str, Style]]:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await play(pilot, down=down)
        assert app.screen.query_one("#timeline-pane").has_class("-down") is down
        return cells(lines(app.screen.query_one(TimelinePlot)))


async def test_the_plot_dims_with_its_pane_when_the_server_is_down():
    """Every drawn cell (marks, axes, labels) is fainter against its background than while up."""
    up, down = await plot_cells(down=False), await plot_cells(down=True)
    assert [c for c, _ in up] == [c for c, _ in down], "the same plot, only dimmer"
    drawn = [(u, d) for (char, u), (_, d) in zip(up, down, strict=True) if not char.isspace()]
    assert any(char == PREFILL_MARK for char, _ in up) and len(drawn) > 100
    faint = [contrast(d) < 0.75 * contrast(u) for u, d in drawn]
    assert all(faint), f"{faint.count(False)} of {len(drawn)} cells not dimmed"


# ---- the metrics sparklines ------------------------------------------------------------------------


class _MetricsHost(App):
    CSS_PATH = TCSS

    def compose(self) -> ComposeResult:
        yield MetricsPane(id="metrics-pane", classes="pane")


NO_REQUESTS = HistogramQuantiles(p50=None, p90=None, p99=None, mean=None, n=0, n_total=2, first_le=0.001, last_le=80.0)


def idle(t_unix: float):
    """A scrape whose window saw no request: no TTFT or ITL quantiles."""
    return replace(metrics(t_unix, 0, 0.0, 0.0), histograms={"ttft_s": NO_REQUESTS, "itl_s": NO_REQUESTS})


@pytest.mark.parametrize("busy_first", [False, True])
async def test_ttft_and_itl_sparklines_lie_flat_while_the_window_has_no_requests(busy_first):
    app = _MetricsHost()
    async with app.run_test(size=(80, 12)) as pilot:
        pane = app.query_one(MetricsPane)
        feed = [metrics(T0, 1, 0.01, 190.0)] if busy_first else []
        feed += [idle(T0 + i) for i in range(1, 7)]
        for snapshot in feed:
            pane.snapshot = snapshot
            await pilot.pause()
        for key in ("ttft", "itl"):
            spark = app.query_one(f"#spark-{key}", Sparkline)
            assert list(spark.data)[-6:] == [0.0] * 6, "no requests: the baseline"
            [row] = lines(spark)
            assert row.text[-2:] == "▁▁", "the latest windows are flat"  # 6 scrapes span ≥ 2 cells
            flat = row.text.count("▁")
            if busy_first:  # the one busy window is a bar, not the whole line
                assert 0 < len(row.text) - flat <= 2, row.text
                assert max(spark.data) > 0
            else:
                assert flat == len(row.text) == spark.size.width
        assert "none in window" in str(app.query_one("#value-ttft").render())
