"""One way to measure, for the CLI and the UI alike, with the run record built here and nowhere else:

- an experiment: a plan run on a target (a server, or phasetop's own simulators in each setup), and what stopped it
  short;
- a load: a `LoadRunner`'s requests, marked where the measurement guard knows better than their figures (a fresh
  server's cold first request, delivery that was not generation), and `vllm bench serve`'s figures over them;
- a probe: requests one after another, marked the same way, and their summary.

    measured = await measure(plan, OnServer(client, info), on_progress, should_stop, meter_for=meter_for)
    measured.result.finding, measured.error, measured.run    # run: None when no row finished
    loaded = await measure_load(LoadRunner(client, info, workload, dial, meter), params, guard)
    loaded.figures, loaded.run                                # run: None when no request produced a token
    probed = await measure_probe(settings, info, guard, ProbeParams(None, 200, 64), meter_for)
    probed.requests, probed.failure, probed.run               # run: None when a request failed
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from time import monotonic
from typing import Any

from tui.config import Settings
from tui.core.experiments.disaggregation import KvLink
from tui.core.experiments.plans import Plan
from tui.core.experiments.setups import setups_server
from tui.core.experiments.speculation import setups as speculation_setups
from tui.core.experiments.speculation import speculation_server
from tui.core.measure.bench import bench_figures
from tui.core.measure.delivery import Guard
from tui.core.measure.records import RequestTiming, summarize_requests
from tui.core.runs.run_record import new_run
from tui.sources.detect import ServerInfo
from tui.sources.errors import SourceError
from tui.sources.guard import with_speculation
from tui.sources.http import ServerClient, client_for
from tui.sources.identity import server_identity
from tui.sources.meter import LocalMeter, Meter
from tui.sources.stream import StreamRequest
from tui.sources.workloads.disaggregation import run_disaggregation
from tui.sources.workloads.experiments import ExperimentFailed, ExperimentResult, ProgressCallback, run_experiment
from tui.sources.workloads.load import LoadResult, LoadRunner
from tui.sources.workloads.probe import ProbeParams, run_probe
from tui.sources.workloads.speculation import run_speculation


@dataclass(frozen=True, slots=True)
class OnServer:
    """The server behind `client`, as `describe_configured` found it."""

    client: ServerClient
    info: ServerInfo
    guard: Guard = Guard()


@dataclass(frozen=True, slots=True)
class OnOwnSimulators:
    """phasetop's simulator started in each setup (the disaggregation and speculation experiments): there is no one
    server to name; `link` is disaggregation's."""

    link: KvLink
    gpu: str
    model: str
    sim_args: Sequence[str] = ()
    """Flags every setup's simulator gets too: the device, the model, a time scale (`simulator_args`)."""


Target = OnServer | OnOwnSimulators


@dataclass(frozen=True, slots=True)
class Measured:
    """An experiment, done or stopped short: what it measured (None when nothing was), why it stopped (None when it
    ended), the server it ran on, and its run record (None when no row finished, so nothing is worth keeping)."""

    result: ExperimentResult | None
    error: str | None
    server: dict[str, Any]
    duration_s: float
    run: dict[str, Any] | None = None


async def measure(plan: Plan, target: Target, on_progress: ProgressCallback | None = None,
                  should_stop: Callable[[], bool] | None = None, *, exact_length: bool = True,
                  meter_for: Callable[[ServerClient], Meter] = LocalMeter, params: dict[str, Any] | None = None) -> Measured:
    """Run `plan` on `target`; `params` are added to the run's (who ran it: "phasetop tune", its setting).

    A request that fails or `should_stop()` ends it with the rows finished so far; an unreachable server with none.
    """
    started, clock = datetime.now(UTC), monotonic()
    try:
        result, error = await _run(plan, target, on_progress, should_stop, exact_length, meter_for), None
    except ExperimentFailed as failed:
        result, error = failed.partial, str(failed)
    except SourceError as failed:
        result, error = None, str(failed)
    duration_s = monotonic() - clock
    if isinstance(target, OnOwnSimulators) and plan.vary == "speculation":
        server = identity = speculation_server(target.gpu, target.model, speculation_setups())
        workload = plan.to_json()
    elif isinstance(target, OnOwnSimulators):
        server = identity = setups_server(target.link, target.gpu, target.model)
        workload = {**plan.to_json(), "kv_link": target.link.name}
    else:
        server = target.info.to_json()
        workload = {**plan.to_json(), "api": target.info.kind, "model": target.info.model}
    if result is None or not result.rows:
        return Measured(result, error, server, duration_s)
    if isinstance(target, OnServer):
        identity = await server_identity(target.client, target.info)
    run = new_run("sweep", {**(params or {}), **workload}, identity, [t.to_json() for t in result.requests],
                  {"server": server, **result.to_json()}, started, datetime.now(UTC))
    return Measured(result, error, server, duration_s, run)


async def _run(plan: Plan, target: Target, on_progress: ProgressCallback | None, should_stop: Callable[[], bool] | None,
               exact_length: bool, meter_for: Callable[[ServerClient], Meter]) -> ExperimentResult:
    if isinstance(target, OnOwnSimulators) and plan.vary == "speculation":
        return await run_speculation(plan, on_progress, should_stop, target.sim_args, exact_length, meter_for)
    if isinstance(target, OnOwnSimulators):
        return await run_disaggregation(plan, target.link, on_progress, should_stop, target.sim_args, exact_length,
                                        meter_for)
    return await run_experiment(target.client, target.info, plan, on_progress, should_stop, target.guard,
                                exact_length, meter_for(target.client))


@dataclass(frozen=True, slots=True)
class LoadMeasured:
    """A load, done: the runner's result, its requests marked (cold, burst), the figures and the run record (None
    when no request produced a token)."""

    result: LoadResult
    requests: list[RequestTiming]
    figures: dict[str, Any]
    run: dict[str, Any] | None


async def measure_load(runner: LoadRunner, params: dict[str, Any] | Callable[[], dict[str, Any]], guard: Guard,
                       slo_s: tuple[float | None, float | None] = (None, None),
                       on_finished: Callable[[StreamRequest, RequestTiming], None] | None = None) -> LoadMeasured:
    """Run `runner` to its end (the caller may stop it, turn its dial, read its progress meanwhile); `params` are the
    run's (the workload's shape, never settings wholesale; a function when a dial turned meanwhile is recorded as it
    was left), `slo_s` goodput's TTFT and TPOT limits in seconds.

    The figures stay as `vllm bench serve` counts them, so they compare; the requests behind them are marked. An
    endless run's figures are its own, kept over every request as it went (its requests are a sample).
    Raises SourceError when the server cannot be reached before the first send.
    """
    started = datetime.now(UTC)
    result = await runner.run(on_finished)
    finished = datetime.now(UTC)
    guard = await with_speculation(guard, runner.client)
    requests = guard.judged(result.requests)
    figures = result.figures() if result.endless is not None else bench_figures(requests, result.duration_s, *slo_s)
    if not figures["completed"]:
        return LoadMeasured(result, requests, figures, None)
    identity = await server_identity(runner.client, runner.server)
    run = new_run("bench", params() if callable(params) else params, identity, [r.to_json() for r in requests], figures, started, finished,
                  requests_sample=result.sample_note())
    return LoadMeasured(result, requests, figures, run)


@dataclass(frozen=True, slots=True)
class ProbeMeasured:
    """A probe, done or stopped at its first failure: its requests judged by the guard after it, why it stopped
    (None when every request ran), and its run record (None when it stopped short or none was asked for)."""

    server: ServerInfo
    requests: list[RequestTiming]
    failure: str | None
    run: dict[str, Any] | None


async def measure_probe(settings: Settings, server: ServerInfo, guard: Guard, params: ProbeParams,
                        meter_for: Callable[[ServerClient], Meter] = LocalMeter,
                        on_request: Callable[[int, StreamRequest], None] | None = None,
                        keep_run: bool = True) -> ProbeMeasured:
    """Probe `server` (`run_probe`); `keep_run`: build the run record (its identity is read from the server)."""
    started = datetime.now(UTC)
    probed = await run_probe(settings, server, guard, params, meter_for, on_request)
    finished = datetime.now(UTC)
    requests = probed.guard.judged(probed.requests)
    if probed.failure or not keep_run:
        return ProbeMeasured(server, requests, probed.failure, None)
    async with client_for(settings, server.url) as client:
        identity = await server_identity(client, server)
    run = new_run("probe", params.to_json(), identity, [r.to_json() for r in requests], summarize_requests(requests),
                  started, finished)
    return ProbeMeasured(server, requests, None, run)
