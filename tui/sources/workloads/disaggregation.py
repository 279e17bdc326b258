"""The disaggregation experiment's driver: phasetop's simulator started in each setup, the interference workload run
on it, one row per setup and long-prompt length, and the finding.

    plan = make_plan("disaggregation")
    result = await run_disaggregation(plan, find_link("ndr"), on_progress)
    result.finding    # "1P1D over InfiniBand NDR wins: streams' worst gap ×0.04 (…), long-prompt TTFT +12 ms …"

It needs no server: four configurations cannot be one URL. Each simulator is a child process on a free loopback
port, started and stopped off the event loop (a start takes a second or two), so a UI worker can run it as it runs
`run_experiment`; progress goes to the same kind of callback.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

from tui.core.experiments.disaggregation import KvLink
from tui.core.experiments.columns import describe_row
from tui.core.experiments.setups import Setup, disaggregation_row, setups
from tui.core.experiments.findings import finding
from tui.core.experiments.plans import INTERFERENCE_STREAMS, Plan, make_plan
from tui.core.measure.records import RequestTiming
from tui.sources.servers.simulator_server import SimulatorError, SimulatorProcess
from tui.sources.detect import describe_server
from tui.sources.errors import SourceError
from tui.sources.workloads.experiments import ExperimentFailed, ExperimentResult, Progress, ProgressCallback, run_experiment
from tui.sources.http import ServerClient, make_client
from tui.sources.meter import LocalMeter, Meter


async def run_disaggregation(
    plan: Plan,
    link: KvLink,
    on_progress: ProgressCallback | None = None,
    should_stop: Callable[[], bool] | None = None,
    sim_args: Sequence[str] = (),
    exact_length: bool = True,
    meter_for: Callable[[ServerClient], Meter] = LocalMeter,
) -> ExperimentResult:
    """Run `plan` (`make_plan("disaggregation", …)`) on each of `setups(link)`, each simulator with `sim_args` too
    (a device, a model, a time scale); `meter_for` gives the meter that times each simulator's requests.

    Raises `ExperimentFailed` holding the rows finished when a simulator does not start, a request fails, or
    `should_stop()` turns true (checked after each setup).
    """
    chosen = setups(link)
    rows: list[dict] = []
    requests: list[RequestTiming] = []

    def result() -> ExperimentResult:
        bursts = sum(1 for t in requests if t.burst)
        return ExperimentResult(plan, tuple(rows), finding(plan.vary, rows, bursts, plan.slos), tuple(requests))

    def emit(message: str, fraction: float, row: dict | None = None) -> None:
        if on_progress is not None:
            on_progress(Progress(plan.vary, message, min(1.0, fraction), row))

    for index, setup in enumerate(chosen):
        def relay(progress: Progress, setup: Setup = setup, index: int = index) -> None:
            emit(f"{setup.label}: {progress.message}", (index + progress.fraction) / len(chosen))

        emit(f"{setup.label}: starting the simulator", index / len(chosen))
        try:
            timings = await _run_setup(setup, plan, relay, [*setup.sim_args, *sim_args], exact_length, meter_for)
        except ExperimentFailed as failure:
            requests.extend(failure.partial.requests)
            raise ExperimentFailed(f"{setup.label}: {failure}", result()) from None
        except (SimulatorError, SourceError, ValueError) as error:  # ValueError: the plan cannot fit the simulator
            raise ExperimentFailed(f"{setup.label}: {error}", result()) from None
        requests.extend(timings)
        for tokens, rounds in _rounds(plan, timings):
            rows.append(disaggregation_row(setup, tokens, rounds))
            emit(describe_row(plan.vary, rows[-1]), (index + 1) / len(chosen), rows[-1])
        if should_stop is not None and should_stop() and index + 1 < len(chosen):
            raise ExperimentFailed("interrupted", result())
    return result()


async def _run_setup(setup: Setup, plan: Plan, relay: ProgressCallback, args: list[str], exact_length: bool,
                     meter_for: Callable[[ServerClient], Meter]) -> tuple[RequestTiming, ...]:
    """The interference workload on a simulator started with `args`, stopped after; every timed request, in order."""
    sim = await start_simulator([*args, "--enable-per-request-metrics"])
    try:
        async with make_client(sim.url) as client:
            server = await describe_server(client, "openai", None)
            inner = make_plan("interference", plan.values, plan.max_tokens, plan.repeat, server.max_model_len)
            result = await run_experiment(client, server, inner, relay, exact_length=exact_length, meter=meter_for(client))
        return result.requests
    finally:
        await asyncio.to_thread(sim.stop)


async def start_simulator(args: list[str]) -> SimulatorProcess:
    """A simulator started off the event loop; one cancelled while it starts (Escape in the UI) is stopped once it
    is up, not left running."""
    starting = asyncio.ensure_future(asyncio.to_thread(SimulatorProcess.start, args))
    try:
        return await asyncio.shield(starting)
    except asyncio.CancelledError:
        with contextlib.suppress(SimulatorError):
            await asyncio.to_thread((await starting).stop)
        raise


def _rounds(plan: Plan, timings: Sequence[RequestTiming]):
    """(long-prompt tokens, its rounds) per value: the interference driver records each round as its running streams
    then the long prompt, values in order, `repeat` rounds each."""
    size = INTERFERENCE_STREAMS + 1
    rounds = [(timings[i:i + size - 1], timings[i + size - 1]) for i in range(0, len(timings), size)]
    for index, tokens in enumerate(plan.values):
        yield tokens, rounds[index * plan.repeat:(index + 1) * plan.repeat]
