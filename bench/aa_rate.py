"""The A/A check of `compare`: the same workload run twice on the same server, how often is a difference named?

Starts `phasetop sim` (H100 SXM + 8B, its defaults) and, per trial, runs `phasetop bench` twice with the same
workload and seed (Poisson arrivals), then compares the two runs as `phasetop compare` does. A trial is a false
call when any figure comes out "better" or "worse". Prints, per figure, how often it was called, the share of
trials with no call at all (the target: at least 95 %), and how often each figure had enough draws for an
interval at all (a check that the rate is not met by never judging).

    .venv/bin/python bench/aa_rate.py [--trials 100] [--num-prompts 32] [--request-rate 40] [--max-tokens 16]

Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tui.cli.main import main as phasetop  # noqa: E402
from tui.core.runs.run_record import compare_runs, run_from_bench_document  # noqa: E402
from tui.core.measure.uncertainty import BETTER, LEVEL, NOT_ENOUGH, WORSE  # noqa: E402
from tui.sources.servers.simulator_server import SimulatorProcess  # noqa: E402


def bench(url: str, args: argparse.Namespace, name: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = phasetop(["bench", "--url", url, "--num-prompts", str(args.num_prompts), "--request-rate",
                         str(args.request_rate), "--prompt-tokens", "64", "--max-tokens", str(args.max_tokens),
                         "--seed", "1", "--json"])
    if code != 0:
        raise SystemExit(f"bench failed (exit {code})")
    return run_from_bench_document(json.loads(out.getvalue()), name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--num-prompts", type=int, default=32)
    parser.add_argument("--request-rate", type=float, default=40.0)
    parser.add_argument("--max-tokens", type=int, default=16)
    args = parser.parse_args()
    called, judged, trials_called = Counter(), Counter(), 0
    with SimulatorProcess.start([]) as sim:
        for trial in range(args.trials):
            comparison = compare_runs(bench(sim.url, args, "a"), bench(sim.url, args, "b"))
            calls = [f["label"] for f in comparison["figures"] if f["verdict"] in (BETTER, WORSE)]
            called.update(calls)
            judged.update(f["label"] for f in comparison["figures"] if f["verdict"] != NOT_ENOUGH)
            trials_called += bool(calls)
            print(f"trial {trial + 1}/{args.trials}: {', '.join(calls) or 'no difference'}", file=sys.stderr, flush=True)
        labels = [f["label"] for f in comparison["figures"]]
    no_call_pct = 100 * (args.trials - trials_called) / args.trials
    print(f"{args.trials} A/A trials: bench --num-prompts {args.num_prompts} --request-rate {args.request_rate} "
          f"--max-tokens {args.max_tokens} --seed 1, twice, on one simulator; intervals at {100 * LEVEL:g} %; "
          f"load 1m {os.getloadavg()[0]:.2f}")
    print(f"{'figure':<24} {'called':>7} {'judged':>7}")
    for label in labels:
        print(f"{label:<24} {called[label]:>7} {judged[label]:>7}")
    print(f"trials with no difference named: {no_call_pct:.1f} % (target ≥ 95 %): {'met' if no_call_pct >= 95 else 'MISSED'}")
    print(json.dumps({"bench": "aa_rate", "trials": args.trials, "level": LEVEL, "no_call_pct": no_call_pct,
                      "called": dict(called), "judged": dict(judged), "params": vars(args)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
