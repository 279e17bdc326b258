"""Start-up: find the server, or start the embedded simulator, then run the app and clean up."""

from __future__ import annotations

import httpx

from tui.app.app import PhasetopApp
from tui.config import Settings
from tui.core.devices import find_device
from tui.core.models import find_model
from tui.core.server_ceiling import simulator_ceiling
from tui.sim.launcher import SimulatorError, SimulatorProcess

PROBE_TIMEOUT_S = 0.5


def something_answers(url: str) -> bool:
    """True when any HTTP server answers at `url` (any status); False when nothing listens."""
    try:
        httpx.get(url, timeout=PROBE_TIMEOUT_S)
    except httpx.HTTPError:
        return False
    return True


def simulator_args(settings: Settings) -> list[str]:
    return ["--gpu", settings.sim.gpu, "--model", settings.sim.model, "--time-scale", str(settings.sim.time_scale)]


def simulated_server(settings: Settings) -> tuple[str, tuple[float, float, float]]:
    """The header label and (decode ceiling tok/s, KV bytes per token, weight bytes) of the configured simulator.

    The ceiling is divided by the time scale: a simulator slowed 20× decodes 20× below the device's ceiling.
    """
    device, layout = find_device(settings.sim.gpu), find_model(settings.sim.model)
    label = f"simulated {device.name.removeprefix('NVIDIA ')} · {layout.name}"
    if settings.sim.time_scale != 1:
        label += f" · {settings.sim.time_scale:g}× slower"
    row = simulator_ceiling({"gpu": settings.sim.gpu, "model": settings.sim.model, "time_scale": str(settings.sim.time_scale)})
    return label, (row.decode_ceiling_tok_s, row.kv_bytes_per_token, row.weight_bytes)


def run_ui(settings: Settings, url_given: bool, save_runs: bool = True) -> int:
    """Open the UI on the configured server, or on a simulator when none was named and none answers."""
    simulator: SimulatorProcess | None = None
    url, simulated, decode_ceiling = settings.url, None, None
    if not url_given and not something_answers(settings.url):
        simulated, decode_ceiling = simulated_server(settings)
        try:
            simulator = SimulatorProcess.start(simulator_args(settings))
        except SimulatorError as error:
            print(f"phasetop: {error}")
            return 1
        url = simulator.url
    try:
        PhasetopApp(settings, url, simulated, decode_ceiling, save_runs=save_runs).run()
    finally:
        if simulator is not None:
            simulator.stop()
    return 0
