"""Tuning a server's flags: start the server once per setting, run the same workload on each, and repeat the
leader's and the runner-up's until the lead is sure, they tie, or the budget is spent.

The loop `vllm bench sweep serve` runs in batch, for any server command: for each point of the grid the varied
flags make, the command is started with those flags (in its own process group, waited on until /health answers),
the workload runs, the figures are kept and saved as a run, and the server is stopped. A start that fails is a
row with the server's own last line, and the loop goes on. What a person is told goes through `TuneHooks`."""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from time import monotonic
from typing import Any

from tui.config import Settings
from tui.core.experiments.plans import EXPERIMENTS, OWN_SIMULATORS, make_plan
from tui.core.measure.bench import bench_figures
from tui.core.measure.records import RequestTiming
from tui.core.serving.serve_command import ServeCommand, Setting
from tui.core.serving.tune import Objective, Standing, standing
from tui.core.untrusted import one_line
from tui.sources import loop
from tui.sources.detect import describe_configured
from tui.sources.errors import SourceError
from tui.sources.guard import guard_for
from tui.sources.http import ServerClient, client_for
from tui.sources.meter import Meter
from tui.sources.servers.managed_server import ServerStartError
from tui.sources.servers.served_command import start_served
from tui.sources.workloads.experiments import Progress
from tui.sources.workloads.load import LoadDial, LoadRunner, Workload
from tui.workflows.measure import OnServer, measure, measure_load

SOURCE = "phasetop tune"
"""Who ran it, in each saved run's params."""
TUNABLE = tuple(e for e in EXPERIMENTS if e not in OWN_SIMULATORS)
"""The experiments a setting can run (those on phasetop's own simulators start no server of the user's)."""


@dataclass(frozen=True, slots=True)
class TuneWorkload:
    """What runs on each setting: the bench load, or an experiment (`vary`) with its values (None: its defaults)."""

    kind: str
    vary: str | None = None
    values: tuple[int, ...] | None = None

    @classmethod
    def parse(cls, text: str) -> TuneWorkload:
        """`bench`, `sweep:interference`, `sweep:prompt-tokens:200,2000`; ValueError with the line to show."""
        kind, _, rest = text.strip().partition(":")
        if kind == "bench" and not rest:
            return cls("bench")
        vary, _, values = rest.partition(":")
        if kind != "sweep" or vary not in TUNABLE:
            raise ValueError(f"{text!r}: give bench, or sweep:WHAT[:N,N,…] with WHAT one of {', '.join(TUNABLE)}")
        try:
            numbers = tuple(int(v.replace("_", "")) for v in values.split(",")) if values else None
        except ValueError:
            raise ValueError(f"{text!r}: the values are whole numbers separated by commas") from None
        try:
            make_plan(vary, numbers)  # bad values fail before any server starts; the fit to max_model_len is per start
        except ValueError as error:
            raise ValueError(f"{text!r}: {error}") from None
        return cls("sweep", vary, numbers)

    def __str__(self) -> str:
        if self.kind == "bench":
            return "bench"
        return f"sweep:{self.vary}" + (f":{','.join(map(str, self.values))}" if self.values else "")


@dataclass(frozen=True, slots=True)
class Budget:
    """What the repeats may cost while the lead is not sure: requests, or seconds (`90s`)."""

    requests: int | None = None
    seconds: float | None = None

    @classmethod
    def parse(cls, text: str) -> Budget:
        """`64` (requests) or `90s`; ValueError with the line to show."""
        text = text.strip()
        try:
            if text.endswith("s"):
                seconds = float(text[:-1])
                if seconds >= 0 and math.isfinite(seconds):
                    return cls(seconds=seconds)
            elif int(text) >= 0:
                return cls(requests=int(text))
        except ValueError:
            pass
        raise ValueError(f"{text!r}: give requests (e.g. 64) or seconds (e.g. 90s), 0 or more")

    def left(self, requests: int, started: float) -> bool:
        if self.seconds is not None:
            return monotonic() - started < self.seconds
        return requests < (self.requests or 0)

    def __str__(self) -> str:
        return f"{self.seconds:g} s" if self.seconds is not None else f"{self.requests} requests"


@dataclass(frozen=True, slots=True)
class LoadShape:
    """The bench load each setting runs (as `phasetop bench` sends it)."""

    num_prompts: int = 32
    max_concurrency: int = 8
    request_rate: float = math.inf
    prompt_tokens: int = 1024
    max_tokens: int = 128

    @property
    def in_flight(self) -> int:
        return min(self.max_concurrency, self.num_prompts)

    def to_json(self) -> dict[str, Any]:
        return {"num_prompts": self.num_prompts, "max_concurrency": self.max_concurrency,
                "request_rate": "inf" if math.isinf(self.request_rate) else self.request_rate,
                "prompt_tokens": self.prompt_tokens, "max_tokens": self.max_tokens}


@dataclass(frozen=True, slots=True)
class TuneParams:
    """A tuning: the command, the settings to try (each a point of the varied flags' grid), what makes one best,
    what runs on each, and what the repeats may cost."""

    command: ServeCommand
    points: tuple[tuple[Setting, ...], ...]
    objective: Objective
    workload: TuneWorkload = TuneWorkload("bench")
    load: LoadShape = LoadShape()
    slo_s: tuple[float | None, float | None] = (None, None)
    """Goodput's TTFT and TPOT limits, in seconds."""
    start_timeout_s: float = 600.0
    budget: Budget | None = None
    """None: twice the load's requests."""
    renice: bool = False
    """vLLM's busy-polling threads at nice 19 once each start is up (a small CPU host)."""

    @property
    def repeat_budget(self) -> Budget:
        return self.budget if self.budget is not None else Budget(requests=2 * self.load.num_prompts)

    def what_runs(self) -> str:
        return f"{self.load.num_prompts} requests" if self.workload.kind == "bench" else f"the {self.workload.vary} experiment"


@dataclass(frozen=True, slots=True)
class TuneHooks:
    """What the workflow tells and asks of its caller: a line of progress, the saving of a run (True when saved),
    and what times the requests of a workload `n` streams wide (the caller's meter processes, closed after)."""

    note: Callable[[str], None]
    save: Callable[[dict[str, Any]], bool]
    meters: Callable[[int], AbstractContextManager[Callable[[ServerClient], Meter]]]


@dataclass(frozen=True, slots=True)
class Round:
    """One run of a setting's workload: the figures the table ranks, the requests behind them, and its run record."""

    figures: dict[str, Any]
    requests: list[RequestTiming]
    run: dict[str, Any] | None


@dataclass(slots=True)
class Tried:
    """One setting's rounds so far: its row (what the JSON says), and the requests and values the verdict weighs."""

    point: tuple[Setting, ...]
    row: dict[str, Any]
    requests: list[dict[str, Any]] = field(default_factory=list)
    round_values: list[float] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Tuned:
    """The tuning, done: each setting's row, where the leader and the runner-up stand, the repeat rounds, and why
    the repeats stopped ("separated", "tie", "budget spent", "a repeat failed", "one setting measured", "nothing
    measured")."""

    rows: list[dict[str, Any]]
    standing: Standing
    repeats: int
    stopped: str


def tune(params: TuneParams, settings: Settings, hooks: TuneHooks) -> Tuned:
    """Try every setting, then repeat the two in front until the lead is sure (blocking: each start and workload
    runs on an event loop of its own)."""
    tried = [_tried(params, settings, hooks, point, f"{n}/{len(params.points)}")
             for n, point in enumerate(params.points, start=1)]
    where, repeats, stopped = _separate(params, settings, hooks, tried)
    return Tuned([t.row for t in tried], where, repeats, stopped)


def named(point: tuple[Setting, ...]) -> str:
    return " ".join(str(s) for s in point)


def _tried(params: TuneParams, settings: Settings, hooks: TuneHooks, point: tuple[Setting, ...], step: str) -> Tried:
    row, measured = _measure(params, settings, hooks, point, step)
    tried = Tried(point, row)
    if measured is not None:
        _add_round(tried, measured, params)
    return tried


def _add_round(tried: Tried, measured: Round, params: TuneParams) -> None:
    """A round's requests join the setting's; its figures are then over every round (throughputs over their time)."""
    tried.rounds.append(measured)
    tried.requests += [r.to_json() for r in measured.requests]
    value = params.objective.value(measured.figures)
    if value is not None:
        tried.round_values.append(value)
    every = [r for m in tried.rounds for r in m.requests]
    figures = bench_figures(every, sum(m.figures["duration_s"] for m in tried.rounds), *params.slo_s)
    if tried.rounds[0].figures.get("finding"):
        figures["finding"] = tried.rounds[0].figures["finding"]
    tried.row["figures"], tried.row["rounds"] = figures, len(tried.rounds)


def _separate(params: TuneParams, settings: Settings, hooks: TuneHooks,
              tried: list[Tried]) -> tuple[Standing, int, str]:
    """Repeat the leader's and the runner-up's workloads, a round each, until the lead holds, they tie, or the budget
    is spent. Returns where they stand, the repeat rounds run, and why it stopped."""
    budget, objective = params.repeat_budget, params.objective
    started, spent, repeats = monotonic(), 0, 0
    while True:
        where = standing([t.row["figures"] for t in tried], [t.requests for t in tried],
                         [t.round_values for t in tried], objective)
        if where.leader is None or where.runner_up is None:
            return where, repeats, "one setting measured" if where.leader is not None else "nothing measured"
        if where.settled:
            return where, repeats, "separated" if where.separated else "tie"
        if not budget.left(spent, started):
            return where, repeats, "budget spent"
        repeats += 1
        verdict = where.judged.verdict.replace("_", " ") if where.judged is not None else "not judged"
        for i in (where.leader, where.runner_up):
            hooks.note(f"tune: repeat {repeats}, {named(tried[i].point)}: the lead is not yet sure ({verdict})")
            repeated, measured = _measure(params, settings, hooks, tried[i].point, f"repeat {repeats}")
            if measured is None:
                tried[i].row["repeat_error"] = f"repeat {repeats}: {repeated['error']}"
                return where, repeats, "a repeat failed"
            spent += len(measured.requests)
            tried[i].row["repeat_run_ids"].append(repeated["run_id"])
            _add_round(tried[i], measured, params)


def _measure(params: TuneParams, settings: Settings, hooks: TuneHooks, point: tuple[Setting, ...],
             step: str) -> tuple[dict[str, Any], Round | None]:
    """One row and its measurement, saved as a run: start the command with `point`'s flags, run the workload, stop
    it (a failed start or workload: the row says why, and no measurement)."""
    command = params.command
    for setting in point:
        command = command.with_setting(setting)
    name = named(point)
    row: dict[str, Any] = {"settings": {s.flag: s.value for s in point}, "command": str(command), "figures": None,
                           "error": None, "run_id": None, "repeat_run_ids": [], "repeat_error": None, "rounds": 0}
    hooks.note(f"tune {step} {name}: starting…")
    try:
        server = start_served(command, params.start_timeout_s, renice=params.renice,
                              on_wait=lambda s, line: hooks.note(f"tune {step}: waiting for /health, {s:.0f} s: "
                                                                 f"{one_line(line, 160)}"))
    except ServerStartError as error:
        row["error"] = str(error)
        hooks.note(f"tune {step} {name}: {error}")
        return row, None
    run_params = {"source": SOURCE, "settings": row["settings"], "workload": str(params.workload)}
    bench = params.workload.kind == "bench"
    try:
        measured = loop.run(_bench(params, settings, hooks, command.url, run_params) if bench
                            else _experiment(params, settings, hooks, command.url, step, run_params))
    except SourceError as error:  # an experiment's failure too (ExperimentFailed)
        row["error"] = f"the {'load' if bench else 'experiment'} failed: {error}"
        hooks.note(f"tune {step} {name}: {row['error']}")
        return row, None
    finally:
        server.stop()
    if measured.run is not None and hooks.save(measured.run):
        row["run_id"] = measured.run["id"]
    hooks.note(f"tune {step} {name}: {measured.figures['completed']} done, {describe(measured.figures)}")
    return row, measured


async def _bench(params: TuneParams, settings: Settings, hooks: TuneHooks, url: str,
                 run_params: dict[str, Any]) -> Round:
    load = params.load
    async with client_for(settings, url, load.in_flight) as client:
        server = await describe_configured(client, settings.api, settings.model)
        guard = await guard_for(client, server, settings.bandwidth_gbs)
        workload = Workload(load.prompt_tokens, load.max_tokens, load.num_prompts, exact_length=settings.exact_length)
        with hooks.meters(load.in_flight) as meter_for:
            runner = LoadRunner(client, server, workload, LoadDial(load.request_rate, load.in_flight), meter_for(client))
            measured = await measure_load(runner, {**run_params, **load.to_json()}, guard, params.slo_s)
    return Round(measured.figures, measured.requests, measured.run)


async def _experiment(params: TuneParams, settings: Settings, hooks: TuneHooks, url: str, step: str,
                      run_params: dict[str, Any]) -> Round:
    """The experiment on this start: fitted to its max_model_len, figures over all its requests, its finding kept."""
    workload = params.workload
    assert workload.vary is not None  # a sweep workload names its experiment (TuneWorkload.parse)
    async with client_for(settings, url) as client:
        server = await describe_configured(client, settings.api, settings.model)
        guard = await guard_for(client, server, settings.bandwidth_gbs)
        try:
            plan = make_plan(workload.vary, workload.values, max_model_len=server.max_model_len)
        except ValueError as error:
            raise SourceError(str(error)) from None

        def progress(p: Progress) -> None:
            hooks.note(f"tune {step} {p.vary} [{p.fraction:4.0%}] {p.message}")

        with hooks.meters(plan.streams) as meter_for:
            measured = await measure(plan, OnServer(client, server, guard), progress, exact_length=settings.exact_length,
                                     meter_for=meter_for, params=run_params)
    if measured.error or measured.result is None:
        raise SourceError(measured.error or "the experiment measured nothing")
    result = measured.result
    figures = bench_figures(result.requests, measured.duration_s, *params.slo_s) | {"finding": result.finding}
    return Round(figures, list(result.requests), measured.run)


COLUMNS = (("TTFT p50", "ttft_s", "p50"), ("TTFT p99", "ttft_s", "p99"), ("ITL p50", "itl_s", "p50"),
           ("ITL p99", "itl_s", "p99"), ("worst gap", "itl_s", "max"))
"""The figures a setting's row shows: (label, figure, statistic)."""


def describe(figures: dict[str, Any]) -> str:
    """A round's figures in one line ("TTFT p50 12.0 ms, …, 812 output tok/s")."""
    parts = [f"{label} {figures[key][q] * 1e3:,.1f} ms" for label, key, q in COLUMNS if figures[key].get(q) is not None]
    return ", ".join(parts + [f"{figures['output_throughput']:,.0f} output tok/s"])
