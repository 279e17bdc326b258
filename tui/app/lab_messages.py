"""Facts the lab's workers post: sessions identified, runs saved and read, load progress, experiment progress."""

from __future__ import annotations

from tui.app.messages import Fact, LatestFact
from tui.core.measure.load_steps import LoadProgress
from tui.runs_store import RunListing
from tui.sources.detect import ServerInfo
from tui.sources.workloads.experiments import ExperimentResult, Progress


class SessionIdentified(Fact):
    """The server of session `number` was described: who it is, and its config and flags."""

    def __init__(self, number: int, info: ServerInfo, identity: dict) -> None:
        super().__init__()
        self.number = number
        self.info = info
        """What experiments and the load need to address the server."""
        self.identity = identity
        """`server_identity()`'s object, as a run file keeps it."""


class RunSaved(Fact):
    """A run file was written (or not: `error` says why, one line)."""

    def __init__(self, what: str, run_id: str | None, error: str | None = None) -> None:
        super().__init__()
        self.what = what
        """What was saved, for the note ("session 1", "load", "prompt-tokens sweep")."""
        self.run_id = run_id
        self.error = error


class LoadProgressed(LatestFact):
    """Where the load stands; latest wins."""

    def __init__(self, progress: LoadProgress, ttft_p50_s: float | None, itl_p50_s: float | None, bursts: int = 0) -> None:
        super().__init__()
        self.progress = progress
        self.ttft_p50_s = ttft_p50_s
        """Median TTFT of the last requests the load finished (those timed as generation)."""
        self.itl_p50_s = itl_p50_s
        self.bursts = bursts
        """Of the last requests, those timed in bursts (delivery, not generation) and left out of the medians."""


class LoadStopped(Fact):
    """The load ended: its `vllm bench serve` figures when any request finished, or why it could not run."""

    def __init__(self, figures: dict | None, error: str | None) -> None:
        super().__init__()
        self.figures = figures
        self.error = error


class ExperimentProgressed(Fact):
    """An experiment moved on; `progress.row` is set when a value's row is complete."""

    def __init__(self, progress: Progress) -> None:
        super().__init__()
        self.progress = progress


class ExperimentFinished(Fact):
    """An experiment ended: its result (partial when `error` is set), or only `error` when nothing ran; `run` is
    the result as a run record (see `tui.core.runs.run_record.new_run`) when it has rows."""

    def __init__(self, result: ExperimentResult | None, error: str | None, run: dict | None = None) -> None:
        super().__init__()
        self.result = result
        self.error = error
        self.run = run


class RunsScanned(Fact):
    """The runs dir was read (`scan_runs`): the runs and the files skipped, or `error` when it could not be read."""

    def __init__(self, listing: RunListing, error: str | None = None) -> None:
        super().__init__()
        self.listing = listing
        self.error = error
        """Why the runs dir could not be read, one line."""


class RunsCompared(Fact):
    """Two saved runs were read and compared (`compare_sessions`), or `error` says why not."""

    def __init__(self, comparison: dict | None, error: str | None = None) -> None:
        super().__init__()
        self.comparison = comparison
        self.error = error
