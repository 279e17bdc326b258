"""Every test keeps the user's data dir untouched: the UI saves its sessions, the CLI its runs, by default there."""

import pytest

from tui.core.untrusted import forget_secrets
from tui.sources.servers.simulator_server import SimulatorProcess


LONGEST_FIRST = ("tests/web/", "tests/fleet/test_demo_fleet_script.py")
"""Tests of a minute or so that collect last (by path): run first, so none is the run's tail on one process."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`LONGEST_FIRST` ahead of the rest, the order otherwise kept: xdist hands each process a contiguous share of
    this order and the others steal from its end, so a long test collected last ran alone at the end."""
    items.sort(key=lambda item: not item.nodeid.startswith(LONGEST_FIRST))


@pytest.fixture(autouse=True)
def data_dir_in_tmp(monkeypatch, tmp_path_factory):
    """XDG_DATA_HOME (where the default runs dir lives) in a temp dir; child processes inherit it."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data")))


@pytest.fixture(autouse=True)
def no_secrets_registered():
    """Settings register their key and URL credentials process-wide for redaction: each test starts with none,
    so one test's cannot redact another's output."""
    forget_secrets()
    yield
    forget_secrets()


@pytest.fixture(scope="session")
def sim_url():
    """A simulator child (H100 + 8B, the defaults), one per test process: the tests that share it measure what they
    sent (their own requests, counters' deltas), never a fresh server's totals."""
    with SimulatorProcess.start([]) as sim:
        yield sim.url


@pytest.fixture(scope="session")
def slow_sim_url():
    """A simulator 4× slower than the H100: a TTFT ratio survives a few tens of ms of jitter on a loaded box, and a
    stream lasts long enough to act on it mid-answer."""
    with SimulatorProcess.start(["--time-scale", "4"]) as sim:
        yield sim.url
