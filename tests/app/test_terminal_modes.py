"""The UI over SSH: NO_COLOR honoured, and an 80x24 terminal stacks the panes and reaches each with keys only.

Both run the app on the recorded feed of the snapshot tests (no server, no workers).
"""

import re

from rich.terminal_theme import SVG_EXPORT_THEME
from textual.geometry import Region

from tests.snapshots.recorded import make_app, play
from tui.app.screens.help import HelpScreen

HEX = re.compile(r"#([0-9a-fA-F]{6})\b")
SVG_DEFAULT_FOREGROUND = "{:02x}{:02x}{:02x}".format(*SVG_EXPORT_THEME.foreground_color)
"""What the SVG export writes for its window title and for text with no colour of its own."""


def non_grey_colours(svg: str) -> set[str]:
    """The colours in a screenshot that are not a shade of grey, leaving out the window's traffic lights."""
    svg = re.sub(r"<circle[^>]*>", "", svg)
    found = {h.lower() for h in HEX.findall(svg)} - {SVG_DEFAULT_FOREGROUND}
    return {h for h in found if len({h[0:2], h[2:4], h[4:6]}) > 1}


async def screenshot(monkeypatch, no_color: bool) -> str:
    # Textual reads NO_COLOR once, when the App is made.
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await play(pilot, down=True)
        return app.export_screenshot()


async def test_no_color_renders_in_greys_only(monkeypatch):
    coloured = non_grey_colours(await screenshot(monkeypatch, no_color=False))
    assert len(coloured) >= 5, "the same screen in colour has borders, plot marks, warnings in colour"
    assert non_grey_colours(await screenshot(monkeypatch, no_color=True)) == set()


async def test_80x24_stacks_the_panes_and_tab_reaches_each_one():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await play(pilot)
        screen = app.screen
        assert screen.has_class("-narrow")
        panes = list(screen.query(".pane"))
        assert [p.id for p in panes] == ["timeline-pane", "prompt-pane", "metrics-pane", "gpu-pane"]  # the timeline on top
        assert {p.region.x for p in panes} == {0} and all(p.region.width >= 76 for p in panes), "one column"
        stack = screen.query_one("#panes")
        assert stack.max_scroll_y > 0, "stacked, the panes are taller than 24 rows"
        in_view = Region(0, 2, 80, 21)  # the status line has the first two rows, the footer the last
        reached: set[str] = set()
        for _ in range(20):
            await pilot.press("tab")
            await pilot.pause()
            focused = app.focused
            pane = next(a for a in focused.ancestors_with_self if a.has_class("pane"))
            reached.add(pane.id)
            if focused is pane:
                assert in_view.contains_region(pane.region), f"{pane.id} focused but scrolled out of view"
            if pane.id == "gpu-pane":
                assert stack.scroll_offset.y > 0, "reaching the last pane scrolled the stack"
            if reached == {p.id for p in panes}:
                break
        assert reached == {p.id for p in panes}
        await pilot.press("question_mark")  # the screen's keys work from any pane
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
