"""Every key a screen names works there, as a new user would find it: on each screen, at 80×24, 120×40 and 160×45,
each of the screen's keys (its footer's and the help's) is pressed in turn, a walk for the main screen's own keys
and one for each screen a key of it opens. Each must do something a person sees (the
screen changes, a dialog opens, or a toast says why not), raise nothing, draw its footer inside the frame, and Escape
(or the key's own back) must lead back. Polling is slowed to an hour, so a change on screen is the key's, not a
scrape's.

The compare screen is walked as reached from the runs (two picked, Enter); the fleet's screens in
tests/fleet/test_fleet_screen.py, on its Prometheus. The sweeps (p, x, n, i, g, d) are walked by one of them (p: it
opens the experiment screen and Escape stops it); q on the main screen quits, and is the last key of the walk."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable
from textual.widgets._footer import FooterKey

from tests.app.harness import settings, shows, toasts, wait_for
from tests.app.test_runs_view_kinds import sweep_run
from tests.svg_text import screen_text
from tui.app.app import PhasetopApp
from tui.app.screens.compare import CompareScreen
from tui.app.screens.experiment import ExperimentScreen
from tui.app.screens.flags import FlagEditorScreen
from tui.app.screens.help import HelpScreen
from tui.app.screens.main import MainScreen
from tui.app.screens.roofline import RooflineScreen
from tui.app.screens.runs import RunsScreen
from tui.app.screens.server_log import ServerLogScreen
from tui.app.screens.traffic import TrafficScreen
from tui.runs_store import save_run
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sources.servers.served_command import ServedSimulator

SIZES = [(80, 24), (120, 40), (160, 45)]
SWEEPS_BUT_ONE = {"x", "n", "i", "g", "d"}
"""Each opens the experiment screen as p does, and runs for a minute; p stands for them."""
MAIN_KEYS_LEFT_OUT = {"q", *SWEEPS_BUT_ONE}
SLOW = {"metrics_interval_s": 3600, "gpu_interval_s": 3600}
OPENS = {"question_mark": HelpScreen, "w": RooflineScreen, "T": TrafficScreen, "r": RunsScreen,
         "f": FlagEditorScreen, "o": ServerLogScreen, "p": ExperimentScreen}
"""The main screen's keys that open a screen of their own, walked in turn."""
ARROWS = {"up", "down", "left", "right", "tab", "shift+tab"}
"""A list's or a box's own keys, not the screen's commands."""
WALKED_ELSEWHERE = {(FlagEditorScreen, "enter")}
"""The flag editor's Enter restarts the server: tests/app/test_flag_editor.py and test_restart_failures.py walk it."""


@pytest.fixture(scope="module")
def served_simulator():
    """The demo's set-up: a simulator phasetop runs (so f, o and R are live), shared by every walk."""
    simulator = SimulatorProcess.start([])
    try:
        yield simulator, ServedSimulator(simulator, [])
    finally:
        simulator.stop()


def keys_of(screen: Screen) -> list[Binding]:
    """The screen's own keys, one binding per key: what its footer and the help name (not the app's ctrl+p, nor
    Textual's focus and copy keys every screen has)."""
    own: list[Binding] = []
    for binding in type(screen).__dict__.get("BINDINGS", []):
        own += [replace(binding, key=key.strip()) for key in binding.key.split(",")]
    return own


def picture(app: PhasetopApp) -> tuple:
    """What a person sees: the screen, its cells with their colours (the SVG, its random ids cut), and the toasts."""
    return app.screen, re.sub(r"terminal-\d+", "terminal", app.export_screenshot()), tuple(toasts(app))


def changed_rows(before: tuple, after: tuple) -> list[tuple[str, str]]:
    rows = zip(screen_text(before[1]).rows, screen_text(after[1]).rows, strict=True)
    return [(a, b) for a, b in rows if a != b]


def footer_inside(app: PhasetopApp) -> None:
    width = app.screen.size.width
    for key in app.screen.query(FooterKey):
        if key.display and key.region.width:
            assert key.region.right <= width, f"{type(app.screen).__name__}: {key.description!r} past the frame"


async def settled(pilot, app: PhasetopApp) -> None:
    """Until the screen holds still for half a second (the last answer drawn, its diagnosis written)."""
    for _ in range(30):
        before = picture(app)
        await pilot.pause(0.5)
        if picture(app) == before:
            return


async def press_and_see(pilot, app: PhasetopApp, key: str, where: str) -> None:
    await settled(pilot, app)  # what the last key started (a send, a load) has come to rest
    before = picture(app)
    await pilot.press(key)
    await wait_for(pilot, lambda: picture(app) != before, 8, f"{where}: {key} did nothing a person could see")
    assert app.is_running and app._exception is None, f"{where}: {key} raised {app._exception!r}"


async def back_to(pilot, app: PhasetopApp, screen: Screen, key: str, where: str) -> None:
    if app.screen is screen:
        return
    await pilot.press("escape")
    await wait_for(pilot, lambda: app.screen is screen, 8, f"{where}: Escape after {key} did not come back")


async def walk_screen(pilot, app: PhasetopApp, opened: type[Screen], where: str) -> None:
    """On `opened` (just opened from the main screen): each of its keys but the ways back, then each way back."""
    screen = app.screen
    assert isinstance(screen, opened), where
    footer_inside(app)
    back = [b for b in keys_of(screen) if b.action.split("(")[0] in ("app.pop_screen", "dismiss")]
    for binding in keys_of(screen):
        if binding in back or binding.key in ARROWS or (opened, binding.key) in WALKED_ELSEWHERE:
            continue
        await press_and_see(pilot, app, binding.key, f"{where} · {binding.description}")
        if app.screen is not screen:  # it opened another screen over this one
            await back_to(pilot, app, screen, binding.key, where)
    ways_back = [b.key for b in back]
    for n, key in enumerate(ways_back):  # every way back named leads back
        await pilot.press(key)
        await wait_for(pilot, lambda: shows(app, MainScreen), 8, f"{where}: {key} did not go back")
        if n < len(ways_back) - 1:
            await pilot.press(next(k for k, s in OPENS.items() if s is opened))
            await wait_for(pilot, lambda: shows(app, opened), 8, f"{where}: opened again")


PARTS = ["main", *OPENS]
"""One walk a part, so the walks run side by side: the main screen's keys that open no screen of their own, then
each key that opens one, with that screen's keys."""


def walked_in(part: str, binding: Binding) -> bool:
    if binding.key in MAIN_KEYS_LEFT_OUT:
        return False
    return binding.key not in OPENS if part == "main" else binding.key == part


@pytest.mark.parametrize("part", PARTS)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_every_key_on_every_screen_does_what_it_names(served_simulator, size, part, tmp_path):
    simulator, served = served_simulator
    app = PhasetopApp(settings(tmp_path / "runs", poll=SLOW), simulator.url, "simulated H100 SXM · Llama-3.1-8B",
                      simulator=simulator, served=served)
    async with app.run_test(size=size, notifications=True) as pilot:
        main = app.screen
        await wait_for(pilot, lambda: main.state.lab.server_info is not None, 30, "the server identified")
        await pilot.press("1")  # a request on the timeline: the lanes' and the roofline's keys have one to act on
        await wait_for(pilot, lambda: main.timings and main.timings[-1].e2e_s, 30, "the first answer")
        footer_inside(app)
        await settled(pilot, app)
        if part == "main":  # (once a size: the other parts start alike)
            still = picture(app)
            await pilot.pause(2.0)
            changed = changed_rows(still, picture(app))
            assert picture(app) == still, f"the screen changed by itself (a change after a key would not be the key's): {changed}"
        walked = [binding for binding in keys_of(main) if walked_in(part, binding)]
        assert walked, f"{part}: no key of the main screen's to walk"
        for binding in walked:
            key = binding.key
            where = f"{size[0]}×{size[1]} main · {binding.description}"
            await press_and_see(pilot, app, key, where)
            if key in OPENS:
                await wait_for(pilot, lambda: isinstance(app.screen, OPENS[key]), 8, f"{where}: its screen")
                if key != "p":  # (the experiment runs; its keys are Escape alone)
                    await walk_screen(pilot, app, OPENS[key], where)
                await back_to(pilot, app, main, key, where)
            elif key == "l":  # the load runs until l again
                await press_and_see(pilot, app, "l", f"{where} (stopping it)")
            await back_to(pilot, app, main, key, where)
        await pilot.press("q")
        await wait_for(pilot, lambda: not app.is_running, 10, "q quits")


async def test_the_compare_screen_from_the_runs_has_its_keys_in_the_frame_and_escape_leads_back(sim_url, tmp_path):
    """r, two runs picked, Enter: the compare screen at each size, each of its keys walked, Escape back to the runs."""
    runs = tmp_path / "runs"
    for run in (sweep_run(), sweep_run()):  # (their ids end in random hex)
        save_run(run, runs)
    app = PhasetopApp(settings(runs, poll=SLOW), sim_url, None, None)
    async with app.run_test(size=SIZES[0], notifications=True) as pilot:
        main = app.screen
        for size in SIZES:
            await pilot.resize_terminal(*size)
            await pilot.press("r")
            await wait_for(pilot, lambda: shows(app, RunsScreen), 8, f"{size}: the runs")
            runs_screen = app.screen
            await wait_for(pilot, lambda: runs_screen.query_one(DataTable).row_count == 2, 8, f"{size}: two runs listed")
            await pilot.press("space", "down", "space", "enter")
            await wait_for(pilot, lambda: shows(app, CompareScreen), 8, f"{size}: compare opened")
            footer_inside(app)
            compare = app.screen
            for binding in keys_of(compare):
                await press_and_see(pilot, app, binding.key, f"{size} compare · {binding.description}")
            assert app.screen is runs_screen, f"{size}: Escape on compare leads back to the runs"
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is main, 8, f"{size}: Escape on the runs leads back")
