"""The experiment screen's worker: the plan measured on the server (or phasetop's own simulators), its progress and
its end posted, its run saved.

It runs in a thread on an event loop of its own (as the prompt's requests do), so a repaint never sits between a
chunk and its timestamp."""

from __future__ import annotations

from collections.abc import Callable, Coroutine

from textual.message import Message

from tui.app.feeds.lab import save_quietly
from tui.app.lab_messages import ExperimentFinished, ExperimentProgressed
from tui.config import Settings
from tui.core.experiments.disaggregation import DEFAULT_KV_LINK, find_link
from tui.core.experiments.plans import OWN_SIMULATORS, Plan
from tui.sources.servers.simulator_server import simulator_args
from tui.sources.detect import ServerInfo
from tui.sources.workloads.experiments import Progress
from tui.sources.http import ServerClient, client_for
from tui.core.measure.delivery import Guard
from tui.workflows.measure import Measured, OnOwnSimulators, OnServer, Target, measure
from tui.sources.meter import Meter

Post = Callable[[Message], object]


async def measure_plan(plan: Plan, settings: Settings, server_url: str, info: ServerInfo | None,
                       meter_for: Callable[[ServerClient], Meter], guard: Guard, save: bool,
                       should_stop: Callable[[], bool], post: Post) -> None:
    """Measure `plan`, posting each step and the end (ExperimentFinished, then RunSaved when `save`); run it with
    `loop.run(…, cancelled)`, so leaving the screen cancels it and nothing is posted after."""

    def progress(p: Progress) -> None:
        post(ExperimentProgressed(p))

    def on(target: Target) -> Coroutine[None, None, Measured]:
        return measure(plan, target, progress, should_stop, exact_length=settings.exact_length, meter_for=meter_for)

    if plan.vary in OWN_SIMULATORS:  # phasetop's simulator in each setup: no server to ask
        target = OnOwnSimulators(find_link(DEFAULT_KV_LINK), settings.sim.gpu, settings.sim.model,
                                 simulator_args(settings))
        measured = await on(target)
    else:
        async with client_for(settings, server_url) as client:
            measured = await on(OnServer(client, info, guard))
    post(ExperimentFinished(measured.result, measured.error, measured.run))
    if save and measured.run is not None:
        post(save_quietly(measured.run, settings, f"{plan.vary} sweep"))
