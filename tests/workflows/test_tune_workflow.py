"""The tuning loop on typed parameters, with no command line: what the UI would call. The simulator is the served
command; a setting whose flag it refuses is a row with its reason, the other is measured and saved."""

from __future__ import annotations

import shlex
import sys
from contextlib import contextmanager

from tests.loopback import free_port
from tui.config import Settings
from tui.core.serving.serve_command import ServeCommand, grid, parse_vary
from tui.core.serving.tune import OBJECTIVES
from tui.sources.meter import LocalMeter
from tui.workflows.tune import Budget, LoadShape, TuneHooks, TuneParams, tune


@contextmanager
def local_meters(streams: int):
    yield LocalMeter


def test_the_loop_runs_from_typed_params_and_tells_its_caller_through_the_hooks():
    command = ServeCommand.parse(shlex.join([sys.executable, "-m", "tui", "sim", "--port", str(free_port())]))
    params = TuneParams(command, tuple(grid([parse_vary("max-num-batched-tokens=bogus,512")])), OBJECTIVES["itl-p99"],
                        load=LoadShape(num_prompts=4, max_concurrency=4, prompt_tokens=64, max_tokens=8),
                        start_timeout_s=60, budget=Budget(requests=0))
    notes: list[str] = []
    saved: list[dict] = []
    tuned = tune(params, Settings(_env_file=None), TuneHooks(notes.append, lambda run: saved.append(run) or True,
                                                            local_meters))
    refused, measured = tuned.rows
    assert refused["figures"] is None and "bogus" in refused["error"], "the refused flag's row says why"
    assert measured["figures"]["completed"] == 4 and measured["run_id"] == saved[0]["id"]
    assert saved[0]["params"]["settings"] == {"max-num-batched-tokens": "512"}
    assert tuned.standing.leader == 1 and tuned.stopped == "one setting measured"
    assert any("starting…" in line for line in notes) and any("4 done" in line for line in notes)
