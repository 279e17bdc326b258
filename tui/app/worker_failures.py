"""Where a worker's failure reaches the person: every feed answers with messages, so a worker that raises is a bug,
and it is one line on screen naming what stopped, never a silent stop (workers run with exit_on_error=False: one
bug must not close the app and lose what was measured)."""

from __future__ import annotations

from textual.dom import DOMNode
from textual.worker import Worker, WorkerState

from tui.core.untrusted import one_line


def report_failed_worker(node: DOMNode, event: Worker.StateChanged) -> None:
    """A screen's `on_worker_state_changed`: a toast when the worker ended in an error."""
    if event.state is not WorkerState.ERROR:
        return
    worker, error = event.worker, event.worker.error
    what = worker.name or worker.group
    node.notify(f"{what} stopped: {type(error).__name__}: {one_line(error, 200)}", title="phasetop bug",
                severity="error", timeout=30, markup=False)
