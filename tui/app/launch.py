"""Start-up: find the server, or start the embedded simulator, then run the app and clean up."""

from __future__ import annotations

import io
import os
import socket
import sys
from pathlib import Path

import httpx
from rich.console import Console
from textual.app import App

from tui.app.app import PhasetopApp
from tui.app.feeds.traces import endpoint_of
from tui.app.screens.fleet import FleetScreen
from tui.config import Settings
from tui.core.hardware.devices import find_device
from tui.core.hardware.models import find_model
from tui.core.serving.serve_command import CommandError, ServeCommand
from tui.core.hardware.server_ceiling import simulated_ceiling
from tui.core.untrusted import one_line
from tui.runs_store import default_runs_dir, remove_dead_temps
from tui.sources.servers.simulator_server import SimulatorError, SimulatorProcess, simulator_args
from tui.sources.servers.managed_server import ServerStartError
from tui.sources.otlp_receiver import TraceReceiver
from tui.sources.servers.served_command import ServedCommand, ServedSimulator, start_served
from tui.spawn import keep_drawing_apart, keep_priority

PROBE_TIMEOUT_S = 0.5
DRAWING_NICE = 10
"""The drawing thread's nice value: a meter process (or a server phasetop started) that wakes with a chunk to read
takes the core from a repaint. Without it, on a 2-core host where the meter shared a core with the drawing, 32
streams' ITL read 1.0 ms off the server's writes in the median; with it, 0.1 ms (bench/ui_fidelity.py)."""
EXIT_CRASHED = 70
"""An unhandled exception inside the UI: the CLI's "internal error" status (sysexits' EX_SOFTWARE)."""


def something_answers(url: str) -> bool:
    """True when any HTTP server answers at `url` (any status); False when nothing listens."""
    try:
        httpx.get(url, timeout=PROBE_TIMEOUT_S)
    except httpx.HTTPError:
        return False
    return True


def simulated_server(settings: Settings) -> tuple[str, tuple[float, float, float]]:
    """The header label and (decode ceiling tok/s, KV bytes per token, weight bytes) of the configured simulator.

    The ceiling is divided by the time scale: a simulator slowed 20× decodes 20× below the device's ceiling.
    """
    device, layout = find_device(settings.sim.gpu), find_model(settings.sim.model)
    label = f"simulated {device.name.removeprefix('NVIDIA ')} · {layout.name}"
    if settings.sim.time_scale != 1:
        label += f" · {settings.sim.time_scale:g}× slower"
    row = simulated_ceiling(device, layout, time_scale=settings.sim.time_scale)
    return label, (row.decode_ceiling_tok_s, row.kv_bytes_per_token, row.weight_bytes)


def draw_apart() -> None:
    """For a process that is the UI (`phasetop`): children (meters, servers) start as the process began, on a thread of
    their own, and this thread, which will draw, yields to them (`tui.spawn`). For good: a priority once lowered
    cannot be raised again, so a process that runs anything after the UI should not call this."""
    keep_priority()
    keep_drawing_apart(DRAWING_NICE)


def run_ui(settings: Settings, url_given: bool, save_runs: bool = True, serve: str | None = None,
           start_timeout_s: float = 600.0, renice: bool = False, theme_file: Path | None = None) -> int:
    """Open the UI on the configured server, on the server command `serve` once it is healthy, or on a
    simulator when none was named and none answers. A theme picked in it is written to `theme_file`."""
    simulator: SimulatorProcess | None = None
    url, simulated, decode_ceiling = settings.url, None, None
    if save_runs:  # a save killed mid-write (kill -9) left a hidden temp file: gone before the first save
        remove_dead_temps(default_runs_dir(settings.runs_dir))
    try:
        traces = TraceReceiver.bind(settings.otlp) if settings.otlp else None
    except (ValueError, OSError) as error:
        print(f"phasetop: --otlp {one_line(settings.otlp, 60)}: {one_line(getattr(error, 'strerror', None) or error, 200)}",
              file=sys.stderr)
        return 2
    if serve is not None:
        return _run_served(settings, serve, settings.url if url_given else None, start_timeout_s, save_runs, renice,
                           theme_file, traces)
    sim_args = simulator_args(settings)
    if not url_given and not something_answers(settings.url):
        simulated, decode_ceiling = simulated_server(settings)
        if traces is None:  # its spans come to a receiver of the UI's own: the traffic view works in the demo
            traces = TraceReceiver.bind("127.0.0.1:0")
        sim_args += ["--otlp-traces-endpoint", endpoint_of(traces)]
        try:
            simulator = SimulatorProcess.start(sim_args)
        except SimulatorError as error:
            print(f"phasetop: {one_line(str(error), 500)}", file=sys.stderr)
            return 1
        url = simulator.url
    served = ServedSimulator(simulator, sim_args) if simulator is not None else None
    try:
        return run_app(PhasetopApp(settings, url, simulated, decode_ceiling, save_runs=save_runs, simulator=simulator,
                                   served=served, theme_file=theme_file, traces=traces))
    finally:
        if simulator is not None:
            simulator.stop()


def run_fleet(settings: Settings, save_runs: bool = True, theme_file: Path | None = None) -> int:
    """Open the fleet screen on the settings' Prometheus (`phasetop --prometheus URL`); an instance opens from it
    in the main screen. Prometheus not answering is a line on that screen, not an exit."""
    if not settings.prometheus.url:
        print("phasetop: --prometheus: no URL: give --prometheus URL or set prometheus.url", file=sys.stderr)
        return 2
    if save_runs:
        remove_dead_temps(default_runs_dir(settings.runs_dir))
    fleet = FleetScreen(settings, settings.prometheus.url)
    fleet.save_runs = save_runs
    return run_app(PhasetopApp(settings, settings.prometheus.url, save_runs=save_runs, first=fleet, theme_file=theme_file))


def _run_served(settings: Settings, serve: str, url: str | None, start_timeout_s: float, save_runs: bool,
                renice: bool = False, theme_file: Path | None = None, traces: socket.socket | None = None) -> int:
    """Start the command (progress and its log's last line on stderr), open the UI on it, stop its group after."""
    try:
        command = ServeCommand.parse(serve)
        url = url or command.url
    except CommandError as error:
        print(f"phasetop: --serve: {error}", file=sys.stderr)
        return 2
    print(f"phasetop: starting `{one_line(str(command), 300)}`, waiting for {url}/health", file=sys.stderr, flush=True)
    try:
        server = start_served(command, start_timeout_s, url=url, renice=renice, on_wait=lambda s, line: print(
            f"phasetop: {s:.0f} s: {one_line(line, 160)}", file=sys.stderr, flush=True))
    except ServerStartError as error:
        print(f"phasetop: {one_line(str(error), 500)}", file=sys.stderr)
        for line in error.log_tail.splitlines():
            print(f"  | {one_line(line, 300)}", file=sys.stderr)
        return 1
    served = ServedCommand(command, url, server, start_timeout_s, renice)
    try:
        return run_app(PhasetopApp(settings, url, save_runs=save_runs, served=served, theme_file=theme_file,
                                   traces=traces))
    finally:
        served.stop()


def run_app(app: App, headless: bool = False) -> int:
    """Run `app` to its end: its own exit status, or 70 and one line on stderr (the terminal restored by
    then) when an exception escaped it.

    Textual would print a crash as a traceback with every frame's locals, the settings and the API key
    among them; that is shown only with PHASETOP_DEBUG=1, as in the CLI.
    """
    debug = bool(os.environ.get("PHASETOP_DEBUG"))
    errors = io.StringIO()
    if not debug:
        app.error_console = Console(file=errors, markup=False, highlight=False, width=200)
    try:
        app.run(headless=headless)
    except Exception as error:  # outside the app's own handler (its driver, its start)
        if debug:
            raise
        return _crashed(error)
    if app.return_code == 1 and app._exception is not None:  # Textual's mark of an unhandled exception
        return _crashed(app._exception)
    sys.stderr.write(errors.getvalue())  # an exit message of the app's own, if it left one
    return app.return_code or 0


def _crashed(error: BaseException) -> int:
    print(f"phasetop: internal error: {one_line(f'{type(error).__name__}: {error}', 500)} "
          "(PHASETOP_DEBUG=1 shows the traceback)", file=sys.stderr, flush=True)
    return EXIT_CRASHED
