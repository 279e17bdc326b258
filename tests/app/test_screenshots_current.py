"""The README's screenshots show the app as it is: each committed picture's keys, help and hints are what the app
draws now at that picture's size. Their figures are live measurements and are not compared; what the app draws the
same whatever it measured (the footer, the help, the prompt's placeholder, the flag editor's hint) is. A failure
here means `make screenshots` is due."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.geometry import Region

from tests.app.harness import shows, wait_for
from tests.svg_text import ScreenText, read_screen_text, screen_text
from tui.app.app import PhasetopApp
from tui.app.launch import simulated_server
from tui.app.screens.flags import HINT, FlagEditorScreen
from tui.app.screens.help import HelpScreen
from tui.app.screens.roofline import RooflineScreen
from tui.app.widgets.prompt_pane import PromptText
from tui.config import Settings
from tui.core.serving.serve_command import ServeCommand

SHOTS = Path(__file__).resolve().parents[2] / "screenshots"
MAIN_SHOTS = ("live", "batch", "among", "three-phases", "server-down")
"""The main screen as `make screenshots` leaves it: the prompt box empty, no dialog over it."""
SETTINGS = Settings(_env_file=None)
"""The screenshots' own settings (scripts/screenshots.py): the simulator at its own speed."""


def shot(name: str) -> ScreenText:
    return read_screen_text(SHOTS / f"{name}.svg")


def drawn(app: PhasetopApp) -> ScreenText:
    return screen_text(app.export_screenshot())


async def footer_drawn(pilot, app: PhasetopApp) -> None:
    """Until the footer has its keys and holds still (on a loaded machine the first frames come without them)."""
    last = ""

    def held() -> bool:
        nonlocal last
        footer, last = last, drawn(app).footer
        return bool(footer.strip()) and footer == last

    await wait_for(pilot, held, 20, "the footer drawn")


def stale(name: str, what: str, committed: str, now: str) -> str:
    return f"screenshots/{name}.svg shows an older {what} (run `make screenshots`):\n  committed: {committed!r}\n  app now:   {now!r}"


def test_every_screenshot_this_test_checks_is_committed():
    assert {p.stem for p in SHOTS.glob("*.svg")} >= {*MAIN_SHOTS, "help", "flags", "roofline", "roofline-160x45"}


def assert_region_as_now(name: str, what: str, picture: ScreenText, now: ScreenText, region: Region) -> None:
    """The picture's cells inside `region` (a widget's, in the app now) are the app's now."""
    for y in range(region.y, region.bottom):
        committed, current = picture.rows[y][region.x:region.right], now.rows[y][region.x:region.right]
        assert committed == current, stale(name, f"{what} (row {y})", committed, current)


@pytest.mark.parametrize("name", MAIN_SHOTS)
async def test_a_main_screen_shot_has_the_footer_and_placeholder_the_app_draws_now(sim_url, name):
    picture = shot(name)
    app = PhasetopApp(SETTINGS, sim_url, *simulated_server(SETTINGS), save_runs=False)
    async with app.run_test(size=picture.size) as pilot:
        await footer_drawn(pilot, app)
        prompt_box = app.screen.query_one(PromptText).region  # empty: its placeholder, as far as the box shows it
        now = drawn(app)
    assert picture.footer == now.footer, stale(name, "footer", picture.footer, now.footer)
    if name != "server-down":  # (its prompt pane is scrolled below)
        # The box's columns, top to bottom: where it sits depends on what the header and timeline hold.
        band = Region(prompt_box.x, 0, prompt_box.width, picture.size[1])
        box_now, box_shown = now.words(prompt_box), picture.words(band)
        assert box_now in box_shown, stale(name, "prompt box", box_shown, box_now)


async def test_the_help_shot_lists_the_keys_the_help_lists_now(sim_url):
    picture = shot("help")
    app = PhasetopApp(SETTINGS, sim_url, *simulated_server(SETTINGS), save_runs=False)
    async with app.run_test(size=picture.size) as pilot:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: shows(app, HelpScreen), what="the help")
        await footer_drawn(pilot, app)
        body = app.screen.query_one("#help-body").region
        now = drawn(app)
    assert_region_as_now("help", "help", picture, now, body)
    assert picture.footer == now.footer, stale("help", "footer", picture.footer, now.footer)


async def test_the_flag_editor_shot_has_its_hint_and_keys_as_now():
    picture = shot("flags")
    command = ServeCommand.parse(["python", "-m", "tui", "sim", "--port", "9", "--max-num-batched-tokens", "2048"])
    app = PhasetopApp(SETTINGS, "http://127.0.0.1:9", None, None, save_runs=False)
    async with app.run_test(size=picture.size) as pilot:
        app.push_screen(FlagEditorScreen(command, command, [("last", "the last sends")]))
        await wait_for(pilot, lambda: shows(app, FlagEditorScreen), what="the flag editor")
        await footer_drawn(pilot, app)
        hint = app.screen.query_one("#flags-hint").region
        now = drawn(app)
    assert picture.footer == now.footer, stale("flags", "footer", picture.footer, now.footer)
    # The hint's columns, top to bottom: the rows above it differ with the server (its --help's flags, its defaults).
    shown = picture.words(Region(hint.x, 0, hint.width, picture.size[1]))
    assert HINT in shown, stale("flags", "hint", shown, HINT)


@pytest.mark.parametrize("name", ["roofline", "roofline-160x45"])
async def test_a_roofline_shot_has_the_keys_the_roofline_names_now(sim_url, name):
    picture = shot(name)
    app = PhasetopApp(SETTINGS, sim_url, *simulated_server(SETTINGS), save_runs=False)
    async with app.run_test(size=picture.size) as pilot:
        await pilot.press("w")
        await wait_for(pilot, lambda: shows(app, RooflineScreen), what="the roofline")
        await footer_drawn(pilot, app)
        now = drawn(app)
    assert picture.footer == now.footer, stale(name, "footer", picture.footer, now.footer)
