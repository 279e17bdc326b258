import pytest

from tui.sim.launcher import SimulatorProcess


@pytest.fixture(scope="module")
def sim_url():
    """A simulator child for the app tests (H100 + 8B, the defaults)."""
    with SimulatorProcess.start([]) as sim:
        yield sim.url


@pytest.fixture(scope="module")
def slow_sim_url():
    """A simulator 4× slower than the H100: a TTFT ratio survives a few tens of ms of jitter on a loaded box."""
    with SimulatorProcess.start(["--time-scale", "4"]) as sim:
        yield sim.url
