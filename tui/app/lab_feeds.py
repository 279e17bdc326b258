"""The lab's workers on the main screen: read a session's server identity, save runs, drive the load dial.

Like `feeds.py`, each worker only posts messages. Load runs in a thread on an event loop of its own,
so a repaint never sits between a chunk's arrival and its timestamp.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections import deque
from datetime import UTC, datetime
from pathlib import Path

import httpx
from textual import work
from textual.worker import get_current_worker

from tui.app.lab_messages import LoadProgressed, LoadStopped, RunSaved, SessionIdentified
from tui.config import Settings
from tui.core.client_load import ClientLoad
from tui.core.delivery import flag_bursts
from tui.core.records import RequestTiming
from tui.core.runs import new_run
from tui.core.stats import summarize
from tui.runs_store import default_runs_dir, save_run
from tui.sources import loop
from tui.sources.detect import ServerInfo, describe_server, detect_api
from tui.sources.errors import SourceError
from tui.sources.http import client_for
from tui.sources.identity import server_identity
from tui.sources.load import LoadDial, LoadRunner, Workload

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


class LabFeedsMixin:
    """Workers of `MainScreen` for sessions and load. Needs `self.client`, `self.settings`, `self.server_url`."""

    client: httpx.AsyncClient
    client_load: ClientLoad
    settings: Settings
    server_url: str
    save_runs: bool

    @work(exclusive=True, group="session", exit_on_error=False)
    async def identify_session(self, number: int) -> None:
        """Describe the server and read its identity (config, flags, start time) for session `number`."""
        try:
            api = self.settings.api if self.settings.api != "auto" else await detect_api(self.client)
            info = await describe_server(self.client, api, self.settings.model)
            identity = await server_identity(self.client, info)
        except SourceError:
            return  # the server went away again: the next restart or come-back asks anew
        self.post_message(SessionIdentified(number, info, identity))

    @work(group="save", thread=True, exit_on_error=False)
    def save_session_run(self, run: dict, what: str) -> None:
        self.post_message(save_quietly(run, self.settings, what))

    @work(exclusive=True, group="load", thread=True, exit_on_error=False)
    def run_load(self, info: ServerInfo, dial: LoadDial, workload: Workload, stop: threading.Event) -> None:
        """Send the load until `stop` is set (or the worker is cancelled: the app quits, requests in flight are dropped
        at once); the dial may turn meanwhile."""
        loop.run(self._drive_load(info, dial, workload, stop), get_current_worker().cancelled_event)

    async def _drive_load(self, info: ServerInfo, dial: LoadDial, workload: Workload, stop: threading.Event) -> None:
        started = datetime.now(UTC)
        recent: deque[RequestTiming] = deque(maxlen=LOAD_RECENT)
        async with client_for(self.settings, self.server_url) as client:
            runner = LoadRunner(client, info, workload, dial)
            # A request timed while phasetop itself was near a core is marked, and left out of the dial's medians.
            task = asyncio.create_task(runner.run(on_finished=lambda _request, timing: recent.append(self.client_load.mark(timing))))
            try:
                while not task.done():
                    await asyncio.wait({task}, timeout=LOAD_PROGRESS_S)
                    if stop.is_set():
                        runner.stop()  # requests in flight finish, so their timings count
                    flagged = flag_bursts([r for r in recent if r.ok])
                    done = [r for r in flagged if not r.burst]
                    self.post_message(LoadProgressed(runner.progress(), summarize(r.ttft_s for r in done).p50,
                                                     summarize(g for r in done for g in r.itl_s).p50, len(flagged) - len(done)))
            except asyncio.CancelledError:  # the app is closing: the requests in flight go with it
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                raise
            try:
                result = task.result()
            except SourceError as error:
                self.post_message(LoadStopped(None, str(error)))
                return
            identity = await server_identity(client, info)
        figures = result.figures()
        self.post_message(LoadStopped(figures, result.aborted))
        if figures["completed"] and self.save_runs:
            params = {
                "source": LOAD_SOURCE,
                "request_rate": "inf" if math.isinf(dial.rate) else dial.rate,
                "max_concurrency": dial.concurrency,
                "prompt_tokens": workload.prompt_tokens,
                "max_tokens": workload.max_tokens,
                "burstiness": workload.burstiness,
                "seed": result.seed,
            }
            run = new_run("bench", params, identity, [r.to_json() for r in result.requests], figures,
                          started, datetime.now(UTC), requests_sample=result.sample_note())
            self.post_message(save_quietly(run, self.settings, "load"))
