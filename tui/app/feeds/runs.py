"""The runs view's reads of the disk: the runs dir listed, two run files compared; each answer a message, never an
exception (a run file is anyone's: the view says what it could not read)."""

from __future__ import annotations

from pathlib import Path

from tui.app.lab_messages import RunsCompared, RunsScanned
from tui.core.runs.sessions import compare_sessions
from tui.runs_store import RunListing, RunStoreError, load_run, scan_runs


def list_runs(directory: Path) -> RunsScanned:
    """The runs in `directory`, and the files skipped."""
    try:
        return RunsScanned(scan_runs(directory))
    except RunStoreError as error:
        return RunsScanned(RunListing(), str(error))


def compare_runs(before: str, after: str, directory: Path) -> RunsCompared:
    """The two run files (paths) read and compared."""
    try:
        runs = [load_run(path, directory) for path in (before, after)]
    except RunStoreError as error:
        return RunsCompared(None, str(error))
    return RunsCompared(compare_sessions(*runs))
