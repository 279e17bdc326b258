"""The speculation experiment's driver: phasetop's simulator started with speculative decoding off, then on, the
same streams run at each batch, one row per setup and batch, and the finding.

    plan = make_plan("speculation")
    result = await run_speculation(plan, on_progress)
    result.finding    # "speculation ×2.46 at batch 1, sure: […]; … : worth it up to batch 8, a loss from batch 32"

Like the disaggregation experiment it needs no server: each setup is a child process on a free loopback port.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace

from tui.core.experiments.columns import describe_row
from tui.core.experiments.findings import finding
from tui.core.experiments.plans import Plan, make_plan
from tui.core.experiments.speculation import Setup, setups, speculation_row
from tui.core.measure.records import RequestTiming
from tui.sources.servers.simulator_server import SimulatorError
from tui.sources.detect import describe_server
from tui.sources.errors import SourceError
from tui.sources.http import ServerClient, make_client
from tui.sources.meter import LocalMeter, Meter
from tui.sources.workloads.disaggregation import start_simulator
from tui.sources.workloads.experiments import ExperimentFailed, ExperimentResult, Progress, ProgressCallback, run_experiment


async def run_speculation(
    plan: Plan,
    on_progress: ProgressCallback | None = None,
    should_stop: Callable[[], bool] | None = None,
    sim_args: Sequence[str] = (),
    exact_length: bool = True,
    meter_for: Callable[[ServerClient], Meter] = LocalMeter,
    chosen: Sequence[Setup] = setups(),
) -> ExperimentResult:
    """Run `plan` (`make_plan("speculation", …)`: its values are batches) on each setup, each simulator with `sim_args`
    too (a device, a model, a time scale). Raises `ExperimentFailed` holding the rows finished when a simulator does
    not start, a request fails, or `should_stop()` turns true (checked after each setup)."""
    rows: list[dict] = []
    requests: list[RequestTiming] = []

    def result() -> ExperimentResult:
        bursts = sum(1 for t in requests if t.burst)
        return ExperimentResult(plan, tuple(rows), finding(plan.vary, rows, bursts), tuple(requests))

    def emit(message: str, fraction: float, row: dict | None = None) -> None:
        if on_progress is not None:
            on_progress(Progress(plan.vary, message, min(1.0, fraction), row))

    for index, setup in enumerate(chosen):
        def relay(progress: Progress, setup: Setup = setup, index: int = index) -> None:
            emit(f"{setup.label}: {progress.message}", (index + progress.fraction) / len(chosen))

        def measured(streams: int, timings: tuple[RequestTiming, ...], lag_p99_s: float | None,
                     setup: Setup = setup, index: int = index) -> None:
            requests.extend(timings)
            rounds = [timings[start:start + streams] for start in range(0, len(timings), streams)]
            rows.append(speculation_row(setup, streams, rounds, lag_p99_s))
            share = (plan.values.index(streams) + 1) / len(plan.values)
            emit(describe_row(plan.vary, rows[-1]), (index + share) / len(chosen), rows[-1])

        emit(f"{setup.label}: starting the simulator", index / len(chosen))
        try:
            await _run_setup(plan, relay, measured, [*setup.sim_args, *sim_args], exact_length, meter_for)
        except ExperimentFailed as failure:
            requests.extend(failure.partial.requests)
            raise ExperimentFailed(f"{setup.label}: {failure}", result()) from None
        except (SimulatorError, SourceError, ValueError) as error:  # ValueError: the plan cannot fit the simulator
            raise ExperimentFailed(f"{setup.label}: {error}", result()) from None
        if should_stop is not None and should_stop() and index + 1 < len(chosen):
            raise ExperimentFailed("interrupted", result())
    return result()


BatchMeasured = Callable[[int, tuple[RequestTiming, ...], float | None], None]
"""Called after each batch: its streams, its requests (`repeat` rounds of that many), and how late the simulator
wrote its chunks meanwhile (p99 of its emission lag, `/sim/emission`; None where it did not say)."""


async def _run_setup(plan: Plan, relay: ProgressCallback, measured: BatchMeasured, args: list[str], exact_length: bool,
                     meter_for: Callable[[ServerClient], Meter]) -> None:
    """The concurrency workload at each batch, one after another, on a simulator started with `args` and stopped
    after; each batch handed to `measured` as it ends, so a later one's failure keeps it."""
    sim = await start_simulator(args)
    try:
        async with make_client(sim.url) as client:
            server = await describe_server(client, "openai", None)
            meter = meter_for(client)
            for done, streams in enumerate(plan.values):
                def scaled(progress: Progress, done: int = done) -> None:
                    relay(replace(progress, fraction=(done + progress.fraction) / len(plan.values)))

                inner = make_plan("concurrency", (streams,), plan.max_tokens, plan.repeat, server.max_model_len)
                await _emission_lag(client, reset=True)
                result = await run_experiment(client, server, inner, scaled, exact_length=exact_length, meter=meter)
                measured(streams, result.requests, await _emission_lag(client))
    finally:
        await asyncio.to_thread(sim.stop)


async def _emission_lag(client: ServerClient, reset: bool = False) -> float | None:
    """The simulator's emission lag p99 since the last reset, in seconds (and a reset with `reset`)."""
    response = await client.get("/sim/emission", params={"reset": "1"} if reset else None)
    lag = response.json().get("lag_s") if response.status_code == 200 else None
    return lag.get("p99") if isinstance(lag, dict) else None
