"""Start-up: find the server, or start the embedded simulator, then run the app and clean up."""

from __future__ import annotations

import httpx

from tui.app.app import PhasetopApp
from tui.config import Settings
from tui.core.devices import find_device
from tui.core.models import find_model
from tui.core.roofline import ceiling
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


def run_ui(settings: Settings, url_given: bool) -> int:
    """Open the UI on the configured server, or on a simulator when none was named and none answers."""
    simulator: SimulatorProcess | None = None
    url, simulated, decode_ceiling = settings.url, None, None
    if not url_given and not something_answers(settings.url):
        device, layout = find_device(settings.sim.gpu), find_model(settings.sim.model)
        try:
            simulator = SimulatorProcess.start(simulator_args(settings))
        except SimulatorError as error:
            print(f"phasetop: {error}")
            return 1
        url = simulator.url
        simulated = f"simulated {device.name.removeprefix('NVIDIA ')} · {layout.name}"
        row = ceiling(device=device.name, bandwidth_gbs=device.mem_bandwidth_gbs,
                      peak_tflops=device.peak_bf16_tflops, layout=layout)
        decode_ceiling = (row.decode_ceiling_tok_s, row.kv_bytes_per_token, row.weight_bytes)
    try:
        PhasetopApp(settings, url, simulated, decode_ceiling).run()
    finally:
        if simulator is not None:
            simulator.stop()
    return 0
