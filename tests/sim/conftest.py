"""Simulators for the tests: one child process per distinct set of flags, shared by the whole session."""

from __future__ import annotations

import pytest

from tui.sim.launcher import SimulatorProcess


@pytest.fixture(scope="session")
def start_sim():
    """`start_sim("--flag", "value", …)` → a running SimulatorProcess, started once per distinct flags."""
    started: dict[tuple[str, ...], SimulatorProcess] = {}

    def start(*args: str, env: dict[str, str] | None = None) -> SimulatorProcess:
        key = (*args, *sorted((env or {}).items()))
        if key not in started:
            started[key] = SimulatorProcess.start(list(args), env=env)
        return started[key]

    yield start
    for sim in started.values():
        sim.stop()


@pytest.fixture(scope="session")
def sim(start_sim) -> SimulatorProcess:
    """The reference simulator: no flags (H100 SXM, 8B at 16 bit)."""
    return start_sim()
