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

from tui.core.experiments.columns import describe_row
from tui.core.experiments.findings import finding
from tui.core.experiments.plans import Plan, make_plan
from tui.core.experiments.speculation import Setup, setups, speculation_row
from tui.core.measure.records import RequestTiming
from tui.sim.launcher import SimulatorError
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

        emit(f"{setup.label}: starting the simulator", index / len(chosen))
        try:
            timings = await _run_setup(plan, relay, [*setup.sim_args, *sim_args], exact_length, meter_for)
        except ExperimentFailed as failure:
            requests.extend(failure.partial.requests)
            raise ExperimentFailed(f"{setup.label}: {failure}", result()) from None
        except (SimulatorError, SourceError, ValueError) as error:  # ValueError: the plan cannot fit the simulator
            raise ExperimentFailed(f"{setup.label}: {error}", result()) from None
        requests.extend(timings)
        for streams, rounds in _rounds(plan, timings):
            rows.append(speculation_row(setup, streams, rounds))
            emit(describe_row(plan.vary, rows[-1]), (index + 1) / len(chosen), rows[-1])
        if should_stop is not None and should_stop() and index + 1 < len(chosen):
            raise ExperimentFailed("interrupted", result())
    return result()


async def _run_setup(plan: Plan, relay: ProgressCallback, args: list[str], exact_length: bool,
                     meter_for: Callable[[ServerClient], Meter]) -> tuple[RequestTiming, ...]:
    """The concurrency workload at each batch on a simulator started with `args`, stopped after; every request."""
    sim = await start_simulator(args)
    try:
        async with make_client(sim.url) as client:
            server = await describe_server(client, "openai", None)
            inner = make_plan("concurrency", plan.values, plan.max_tokens, plan.repeat, server.max_model_len)
            result = await run_experiment(client, server, inner, relay, exact_length=exact_length, meter=meter_for(client))
        return result.requests
    finally:
        await asyncio.to_thread(sim.stop)


def _rounds(plan: Plan, timings: Sequence[RequestTiming]):
    """(streams, its rounds) per batch: the concurrency driver records, for each batch in order, `repeat` rounds of
    that many streams."""
    start = 0
    for streams in plan.values:
        rounds = []
        for _ in range(plan.repeat):
            rounds.append(timings[start:start + streams])
            start += streams
        yield streams, rounds
