"""The lab's workers: read a session's server identity, save runs, drive the load dial.

The load's schedule runs in a thread on an event loop of its own; its requests are read and stamped by the
screen's meter processes, so a repaint never sits between a chunk's arrival and its timestamp."""

from __future__ import annotations

import asyncio
import math
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path

import httpx
from textual.message import Message
from textual.worker import get_current_worker

from tui.app.feeds.requests import LaneMeter
from tui.app.lab_messages import LoadProgressed, LoadStopped, RunSaved, SessionIdentified
from tui.config import Settings
from tui.core.measure.delivery import Guard
from tui.core.measure.records import RequestTiming
from tui.core.measure.stats import summarize
from tui.runs_store import default_runs_dir, save_run
from tui.sources import loop
from tui.sources.detect import ServerInfo, describe_configured
from tui.sources.errors import SourceError
from tui.sources.http import ServerClient, client_for
from tui.sources.identity import server_identity
from tui.workflows.measure import measure_load
from tui.sources.workloads.load import LoadDial, LoadRunner, Workload
from tui.sources.meter import Meter

Post = Callable[[Message], object]

LOAD_PROGRESS_S = 0.5
"""The dial's figures are posted this often."""
LOAD_RECENT = 50
"""The dial's TTFT and ITL medians are over this many of the last finished requests."""
LOAD_SOURCE = "ui load dial"


def runs_dir(settings: Settings) -> Path:
    """The runs_dir setting (PHASETOP_RUNS_DIR), else the user data dir's `runs`, as the CLI reads it."""
    return default_runs_dir(settings.runs_dir)


def save_quietly(run: dict, settings: Settings, what: str) -> RunSaved:
    """Save the run; the outcome as a message, never an exception (a full disk must not stop the UI)."""
    try:
        save_run(run, runs_dir(settings))
    except (OSError, ValueError) as error:
        return RunSaved(what, None, str(error))
    return RunSaved(what, run["id"])


async def identify_session(client: httpx.AsyncClient, settings: Settings, number: int, post: Post) -> None:
    """Describe the server and read its identity (config, flags, start time) for session `number`."""
    try:
        info = await describe_configured(client, settings.api, settings.model)
        identity = await server_identity(client, info)
    except SourceError:
        return  # the server went away again: the next restart or come-back asks anew
    post(SessionIdentified(number, info, identity))


class LoadDriver:
    """The dial's load against one server, timed by `meter_for`'s meter: sent until `stop` is set, the dial turning
    meanwhile; each request on the timeline as it streams, progress and the end posted; the run saved when `save` (a request the meter timed while it was late
    or near a core is marked, and left out of the dial's medians)."""

    def __init__(self, settings: Settings, url: str, meter_for: Callable[[ServerClient], Meter], post: Post,
                 save: bool, take_ids: Callable[[int], int], guard: Guard) -> None:
        self._settings = settings
        self._guard = guard
        """The server watch's guard when the load started: the dial's medians are judged by it meanwhile, as the lanes
        are, and the saved run by it once the server's own tokens a step are read at the end (as `phasetop bench`
        does)."""
        self._url = url
        self._meter_for = meter_for
        self._post = post
        self._save = save
        self._take_ids = take_ids
        """Lane ids for the timeline, where each of the load's requests shows as it streams."""

    def run(self, info: ServerInfo, dial: LoadDial, workload: Workload, stop: threading.Event) -> None:
        """In the (thread) worker calling this; cancelled (the app quits), requests in flight are dropped at once."""
        loop.run(self._drive(info, dial, workload, stop), get_current_worker().cancelled_event)

    async def _drive(self, info: ServerInfo, dial: LoadDial, workload: Workload, stop: threading.Event) -> None:
        recent: deque[RequestTiming] = deque(maxlen=LOAD_RECENT)
        async with client_for(self._settings, self._url) as client:
            lanes = LaneMeter(self._meter_for(client), self._take_ids, self._post)
            runner = LoadRunner(client, info, workload, dial, lanes)

            def params() -> dict:
                """Read when the run ends: the dial as it was left."""
                return {
                    "source": LOAD_SOURCE,
                    "request_rate": "inf" if math.isinf(dial.rate) else dial.rate,
                    "max_concurrency": dial.concurrency,
                    "prompt_tokens": workload.prompt_tokens,
                    "max_tokens": workload.max_tokens,
                    "burstiness": workload.burstiness,
                    "seed": runner.seed,
                }

            task = asyncio.create_task(measure_load(runner, params, self._guard,
                                                    on_finished=lambda _request, timing: recent.append(timing)))
            poster = asyncio.create_task(lanes.post_batches())
            try:
                while not task.done():
                    await asyncio.wait({task}, timeout=LOAD_PROGRESS_S)
                    if stop.is_set():
                        runner.stop()  # requests in flight finish, so their timings count
                    flagged = self._guard.flagged([r for r in recent if r.ok])
                    done = [r for r in flagged if not r.burst]
                    self._post(LoadProgressed(runner.progress(), summarize(r.ttft_s for r in done).p50,
                                              summarize(g for r in done for g in r.itl_s).p50, len(flagged) - len(done)))
            except asyncio.CancelledError:  # the app is closing: the requests in flight go with it
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                raise
            finally:
                poster.cancel()
            try:
                measured = task.result()
            except SourceError as error:
                self._post(LoadStopped(None, str(error)))
                return
        self._post(LoadStopped(measured.figures, measured.result.aborted))
        if measured.run is not None and self._save:
            self._post(save_quietly(measured.run, self._settings, "load"))
