import pytest

from tui.sim.launcher import SimulatorProcess


@pytest.fixture(scope="module")
def sim_url():
    """A simulator child for the app tests (H100 + 8B, the defaults)."""
    with SimulatorProcess.start([]) as sim:
        yield sim.url
