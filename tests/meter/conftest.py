import pytest

from tui.sim.launcher import SimulatorProcess


@pytest.fixture(scope="module")
def sim_url():
    """A simulator child for the meter tests (H100 + 8B, the defaults)."""
    with SimulatorProcess.start([]) as sim:
        yield sim.url


@pytest.fixture(scope="module")
def slow_sim_url():
    """A simulator 20× slower than the H100: a stream lasts long enough to kill its meter in the middle of it."""
    with SimulatorProcess.start(["--time-scale", "20"]) as sim:
        yield sim.url
