import httpx
import pytest

from tui.fleet_lab import FleetLab, LabError


@pytest.fixture(scope="module")
def lab():
    """The fleet lab, one per test module: a real Prometheus on three simulators and two DCGM stand-ins."""
    try:
        started = FleetLab.start()
    except LabError as error:
        pytest.fail(f"the fleet lab did not start: {error}", pytrace=False)
    yield started
    started.stop()
    # Nothing it started is left: Prometheus exited, every simulator too, the exporters' ports are closed.
    assert started._prometheus.poll() is not None and not any(sim.running for sim in started.sims)
    for exporter in started.exporters:
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{exporter.url}/metrics", timeout=2)
