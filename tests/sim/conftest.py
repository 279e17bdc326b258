"""Simulators for the tests: one child process per distinct set of flags, shared by the whole session."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest

from tui.core.hardware.devices import find_device
from tui.core.hardware.models import find_model
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sim.options import SimOptions
from tui.sim.step_cost import EngineConfig
from tui.net import bind, url_of
from tui.sim.serve import serve


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


@pytest.fixture(scope="session")
def serve_sim():
    """`serve_sim(enable_per_request_metrics=True, …)` → the URL of a simulator with these SimOptions.

    In this process, on a loopback socket: the vLLM flags below are SimOptions fields that `phasetop sim`
    does not take yet, so the launcher cannot pass them. One server per distinct set, for the session.
    """
    started: dict[tuple, tuple[str, threading.Thread, list]] = {}

    def start(**flags) -> str:
        key = tuple(sorted(flags.items()))
        if key not in started:
            config = EngineConfig(device=find_device("H100 SXM"), layout=find_model("8b"))
            options = SimOptions(config, "meta-llama/Llama-3.1-8B-Instruct", **flags)
            sock = bind("127.0.0.1", 0)
            ready = threading.Event()
            loops: list[asyncio.AbstractEventLoop] = []

            async def run() -> None:
                loops.append(asyncio.get_running_loop())
                with contextlib.suppress(asyncio.CancelledError):  # the teardown's way to stop it
                    await serve(options, sock, lambda _url: ready.set())

            thread = threading.Thread(target=asyncio.run, args=(run(),), daemon=True, name="sim-in-process")
            thread.start()
            assert ready.wait(30), "the in-process simulator did not start"
            started[key] = (url_of(sock), thread, loops)
        return started[key][0]

    yield start
    for _url, thread, loops in started.values():
        with contextlib.suppress(RuntimeError):  # its loop already ended and closed
            loops[0].call_soon_threadsafe(_cancel_all, loops[0])
        thread.join(5)


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    """On the simulator's own loop (tasks are not thread-safe to list from another thread): cancel them all."""
    for task in asyncio.all_tasks(loop):
        task.cancel()
