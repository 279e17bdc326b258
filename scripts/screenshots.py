"""`make screenshots`: drive the app against the simulator with Pilot and save SVGs into screenshots/."""

from __future__ import annotations

import asyncio
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from textual.widgets import Input

from tui.app.app import PhasetopApp
from tui.app.feeds.requests import Send
from tui.app.launch import simulated_server
from tui.app.screens.compare import CompareScreen
from tui.app.screens.experiment import ExperimentScreen
from tui.app.screens.flags import FlagEditorScreen
from tui.app.screens.fleet import FleetScreen
from tui.app.screens.main import MainScreen
from tui.app.screens.roofline import RooflineScreen
from tui.config import Settings
from tui.core.serving.serve_command import ServeCommand, Setting
from tui.fleet_lab import FleetLab, send_load
from tui.sources.servers.simulator_server import SimulatorProcess, simulator_args
from tui.sources.servers.served_command import ServedCommand, start_served

OUT = Path(__file__).resolve().parent.parent / "screenshots"
SIZE = (120, 40)
REAL_TIME = Settings(_env_file=None)
"""Every shot at the simulator's own speed (H100 SXM + 8B, 209 tok/s), so its figures are the README's."""


async def until(pilot, condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the app did not reach the state to shoot")
        await pilot.pause(0.05)


async def settled(pilot, screen: MainScreen, requests: int) -> None:
    """Until `requests` have finished, then a beat for the last publish and replot."""
    await until(pilot, lambda: len(screen.timings) >= requests and all(t.e2e_s for t in screen.timings[-requests:]), 60)
    await pilot.pause(1.0)


async def live_view(url: str) -> None:
    """The split three ways: short then long (aligned lanes), 8 at once (wall clock), and a long prompt landing
    among 8 streams (its prefill stalls their decode); then the help screen."""
    app = PhasetopApp(REAL_TIME, url, *simulated_server(REAL_TIME), save_runs=False)
    async with app.run_test(size=SIZE) as pilot:
        screen: MainScreen = app.screen
        await until(pilot, lambda: screen.state.server.served is not None)
        for key, done in (("1", 1), ("1", 2), ("2", 3)):  # the first short pays the cold start: a second one
            await pilot.press(key)
            await settled(pilot, screen, done)
        app.save_screenshot("live.svg", path=str(OUT))
        await pilot.press("c", "4")
        await settled(pilot, screen, 8)
        app.save_screenshot("batch.svg", path=str(OUT))
        await pilot.press("c")
        await long_prompt_among_streams(pilot, screen)
        await settled(pilot, screen, 9)
        app.save_screenshot("among.svg", path=str(OUT))
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        app.save_screenshot("help.svg", path=str(OUT))


async def server_down() -> None:
    app = PhasetopApp(Settings(_env_file=None), "http://127.0.0.1:9", None, None, save_runs=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.screen.server.down_since is not None)
        await pilot.pause(0.3)
        app.save_screenshot("server-down.svg", path=str(OUT))


async def experiment(url: str) -> None:
    """The prompt-length sweep, finished: chart, table and finding."""
    app = PhasetopApp(REAL_TIME, url, *simulated_server(REAL_TIME), save_runs=False)
    async with app.run_test(size=SIZE) as pilot:
        screen: MainScreen = app.screen
        await until(pilot, lambda: screen.state.lab.server_info is not None)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, ExperimentScreen) and app.screen.finding, 180)
        await pilot.pause(0.3)
        app.save_screenshot("experiment.svg", path=str(OUT))


async def disaggregation() -> None:
    """1P1D over 100 GbE: 8 streams, the long prompt among them in three phases (prefill, its 262 MB moving, decode)
    while the streams decode on; then `d`, the experiment on four setups, with its table and finding. The simulator
    runs 2× slower than the H100 here: at full speed nine streams keep this 2-core box's client so busy that their
    chunks arrive in clumps (rightly flagged as delivery, and drawn as such)."""
    slowed = Settings(_env_file=None, sim={"time_scale": 2.0})
    with SimulatorProcess.start([*simulator_args(slowed), "--disaggregated", "--kv-link", "100gbe",
                                 "--enable-per-request-metrics"]) as sim:
        app = PhasetopApp(REAL_TIME, sim.url, *simulated_server(slowed), save_runs=False)
        async with app.run_test(size=SIZE) as pilot:
            screen: MainScreen = app.screen
            await until(pilot, lambda: screen.state.lab.server_info is not None)
            await pilot.pause(1.5)  # the UI's first seconds keep its core busy: streams read then arrive in clumps
            await long_prompt_among_streams(pilot, screen)
            await settled(pilot, screen, 9)
            screen.action_select_lane(0)
            await pilot.pause(0.5)
            app.save_screenshot("three-phases.svg", path=str(OUT))
            await pilot.press("d")
            await until(pilot, lambda: isinstance(app.screen, ExperimentScreen) and app.screen.is_mounted)
            await until(pilot, lambda: app.screen.finding, 300)
            await pilot.pause(0.3)
            app.save_screenshot("disaggregation.svg", path=str(OUT))


async def long_prompt_among_streams(pilot, screen: MainScreen) -> None:
    """Preset 4 (8 streams), then preset 2 (2,000 tokens) once they decode; returns when all 9 have finished."""
    first = screen.state.next_id
    # The keys' actions, as a person's keys run them: Pilot's press waits for the app to go idle, which it
    # does not while streams run (2 s late here: the long prompt landed after them).
    screen.action_preset("concurrent")
    streams = range(first, first + 8)
    await until(pilot, lambda: all(len(getattr(screen.state.live.record(i), "token_offsets_s", ())) >= 16 for i in streams))
    screen.action_preset("long")
    ended = range(first, first + 9)  # a finished record has its output count; one in flight has none yet
    await until(pilot, lambda: all(getattr(screen.state.live.record(i), "output_tokens", None) for i in ended), 90)


async def roofline() -> None:
    """The roofline screen (w) on the simulator with --enable-mfu-metrics, after a 2,000-token prompt (prefill at
    the compute roof) and then 8 at once (decode at batch 8 under the bandwidth roof), at 120×40 and 160×45; PNGs
    of both too, rendered by the system's chromium (as tests/web's screenshot)."""
    with SimulatorProcess.start([*simulator_args(REAL_TIME), "--enable-mfu-metrics"]) as sim:
        for size, name in ((SIZE, "roofline"), ((160, 45), "roofline-160x45")):
            app = PhasetopApp(REAL_TIME, sim.url, *simulated_server(REAL_TIME), save_runs=False)
            async with app.run_test(size=size) as pilot:
                screen: MainScreen = app.screen
                await until(pilot, lambda: screen.state.server.simulator_flags is not None)
                done = len(screen.timings)
                for key, more in (("2", 1), ("4", 8)):
                    await pilot.press(key)
                    done += more
                    await settled(pilot, screen, done)
                await pilot.press("w")
                await until(pilot, lambda: isinstance(app.screen, RooflineScreen) and app.screen.view.decode is not None
                            and app.screen.view.decode.batch == 8)
                await pilot.pause(0.3)
                app.save_screenshot(f"{name}.svg", path=str(OUT))
            png(OUT / f"{name}.svg")


async def roofline_sweeps() -> None:
    """The roofline screen after the concurrency sweep (n) and the prompt-length sweep (p), then a 2,000-token prompt
    and a send of 8 at once: decode's trace moving right with the batch, prefill's along the compute roof, 8 bit's
    ghost beside batch 8; at 120×40, then the same screen at 160×45."""
    with SimulatorProcess.start(simulator_args(REAL_TIME)) as sim:
        app = PhasetopApp(REAL_TIME, sim.url, *simulated_server(REAL_TIME), save_runs=False)
        async with app.run_test(size=SIZE) as pilot:
            screen: MainScreen = app.screen
            await until(pilot, lambda: screen.state.lab.server_info is not None and screen.state.server.simulator_flags is not None)
            for key, vary in (("n", "concurrency"), ("p", "prompt-tokens")):
                await pilot.press(key)
                await until(pilot, lambda: vary in screen.state.lab.sessions.current.sweeps, 180)
                await pilot.press("escape")
                await until(pilot, lambda: app.screen is screen)
            done = len(screen.timings)
            for key, more in (("2", 1), ("4", 8)):
                await pilot.press(key)
                done += more
                await settled(pilot, screen, done)
            await pilot.press("w")
            await until(pilot, lambda: isinstance(app.screen, RooflineScreen) and app.screen.view.decode is not None
                        and app.screen.view.decode.batch == 8)
            for size, name in ((SIZE, "roofline-sweeps"), ((160, 45), "roofline-sweeps-160x45")):
                await pilot.resize_terminal(*size)
                await pilot.pause(0.5)
                app.save_screenshot(f"{name}.svg", path=str(OUT))
                png(OUT / f"{name}.svg")


def png(svg: Path) -> None:
    """A PNG of a screenshot's SVG beside it, drawn by headless chromium at the SVG's own size (its viewBox)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise RuntimeError("chromium is not installed: the PNGs are drawn by it")
    box = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg.read_text())
    width, height = (math.ceil(float(v)) for v in box.groups())
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={svg.with_suffix('.png')}", f"--window-size={width},{height}", svg.as_uri()],
                   check=True, capture_output=True, timeout=120)


async def before_after() -> None:
    """8 streams with a long prompt landing among them, the simulator restarted on its port with
    --max-num-batched-tokens 256, the same again, then b: the flag that changed over the figures of both.
    (The long prompt's one stall is 8 of about 4,600 gaps: under 1 %, so ITL p99 does not move; the
    interference experiment, `i`, measures it.)"""
    first = SimulatorProcess.start([*simulator_args(REAL_TIME), "--max-num-batched-tokens", "2048"])
    app = PhasetopApp(REAL_TIME, first.url, *simulated_server(REAL_TIME), save_runs=False)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen: MainScreen = app.screen
            await until(pilot, lambda: screen.state.lab.server_info is not None)
            await long_prompt_among_streams(pilot, screen)
            first.stop()
            port = str(urlsplit(first.url).port)
            with SimulatorProcess.start([*simulator_args(REAL_TIME), "--max-num-batched-tokens", "256", "--port", port]):
                await until(pilot, lambda: screen.has_before and screen.state.lab.server_info is not None, 90)
                await long_prompt_among_streams(pilot, screen)
            await pilot.press("b")
            await until(pilot, lambda: isinstance(app.screen, CompareScreen))
            await pilot.pause(0.3)
            app.save_screenshot("compare.svg", path=str(OUT))
    finally:
        first.stop()


async def tuning_loop() -> None:
    """`phasetop --serve` on the simulator: 8 short streams with the long prompt landing among them, then f,
    --max-num-batched-tokens 2048 → 256, Enter: restarted, the same sends again, before → after.

    The simulator runs 4× slower than the H100 here: at full speed 48-token streams end (0.25 s) before the long
    prompt's fitting and send land among them, and longer streams hide its one stall under ITL p99 (it must be
    over 1 % of their gaps)."""
    port = urlsplit(closed_port_url()).port
    # `python` from this venv, found on PATH: the command on screen names no path of this machine.
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    command = ServeCommand.parse(["python", "-m", "tui", "sim", "--time-scale", "4", "--port", str(port),
                                  "--max-num-batched-tokens", "2048"])
    served = ServedCommand(command, command.url, start_served(command, 60), 60)
    app = PhasetopApp(REAL_TIME, served.url, save_runs=False, served=served)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen: MainScreen = app.screen
            await until(pilot, lambda: screen.state.lab.server_info is not None)
            await pilot.pause(1.5)  # the UI's first seconds keep its core busy: streams read then arrive in clumps
            first = screen.state.next_id
            screen.send_requests(Send(screen.state.live.send(8), "8 streams", None, 200, 8, 48))
            await until(pilot, lambda: all(len(getattr(screen.state.live.record(i), "token_offsets_s", ())) >= 4
                                           for i in range(first, first + 8)))
            screen.send_requests(Send(screen.state.live.send(1), "long 2000", None, 2000, 1, 48))
            await until(pilot, lambda: all(getattr(screen.state.live.record(i), "output_tokens", None) for i in range(first, first + 9)))
            await pilot.press("f")
            await until(pilot, lambda: isinstance(app.screen, FlagEditorScreen))
            app.screen.query_one(Input).value = str(command.with_setting(Setting("max-num-batched-tokens", "256")))
            defaults = app.screen.query_one("#flags-defaults")
            await until(pilot, lambda: "differ from the server's defaults" in str(defaults.render()), 60)
            await pilot.pause(0.3)
            app.save_screenshot("flags.svg", path=str(OUT))
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, CompareScreen), 120)
            await pilot.pause(0.3)
            app.save_screenshot("tuned.svg", path=str(OUT))
    finally:
        served.stop()


async def fleet() -> None:
    """The fleet screen on the fleet lab (a real Prometheus on three simulators and two DCGM stand-ins) under its
    demo load, once a whole rate window has passed, so the rates and quantiles are the load's own."""
    with FleetLab.start() as lab:
        stop = threading.Event()
        load = send_load(lab, stop)
        loaded_at = time.time()
        settings = Settings(_env_file=None, prometheus={"url": lab.prometheus_url, "role_label": "role"})
        screen = FleetScreen(settings, lab.prometheus_url)
        screen.save_runs = False
        app = PhasetopApp(settings, lab.prometheus_url, save_runs=False, first=screen)
        try:
            async with app.run_test(size=(160, 45)) as pilot:
                window_s = settings.prometheus.window_s
                await until(pilot, lambda: screen.fleet is not None and screen.fleet.t_unix > loaded_at + window_s + 5, window_s + 60)
                await pilot.pause(0.3)
                app.save_screenshot("fleet.svg", path=str(OUT))
        finally:
            stop.set()
            for thread in load:
                thread.join(5)


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


async def main() -> None:
    OUT.mkdir(exist_ok=True)
    with SimulatorProcess.start(simulator_args(REAL_TIME)) as sim:
        await live_view(sim.url)
    await server_down()
    with SimulatorProcess.start(simulator_args(REAL_TIME)) as sim:
        await experiment(sim.url)
    await roofline()
    await roofline_sweeps()
    await before_after()
    await tuning_loop()
    await disaggregation()
    await fleet()
    print(f"saved: {', '.join(sorted(p.name for p in OUT.glob('*.svg')))}")


if __name__ == "__main__":
    # `python scripts/screenshots.py fleet`: that shot alone (it needs Prometheus, and takes a rate window's time).
    # `python scripts/screenshots.py disaggregation`: the 1P1D shots alone; `roofline`, `roofline-sweeps`: the roofline's.
    asyncio.run({"fleet": fleet, "disaggregation": disaggregation, "roofline": roofline,
                 "roofline-sweeps": roofline_sweeps}[sys.argv[1]]()
                if sys.argv[1:] else main())
