"""A simulator that refuses its flags on a restart is the restart's error, never also an exit: only a child that
said it was ready is reported when it exits."""

import time

import pytest

from tui.sources.servers.simulator_server import SimulatorError, SimulatorProcess


def test_a_refused_restart_raises_and_reports_no_exit_and_a_kill_after_it_is_reported():
    exits = []
    simulator = SimulatorProcess.start([])
    simulator.on_exit = exits.append
    try:
        for _ in range(5):  # the reading thread's report raced the starter's raise: try it several times
            with pytest.raises(SimulatorError, match="invalid int value"):
                simulator.restart(args=["--max-num-batched-tokens", "bogus"])
        time.sleep(0.5)
        assert exits == [], "a child that never started was reported as exited"
        simulator.restart(args=[])
        simulator.process.kill()
        deadline = time.monotonic() + 10
        while not exits and time.monotonic() < deadline:
            time.sleep(0.05)
        assert exits and "SIGKILL" in exits[0], exits
    finally:
        simulator.stop()
