"""The speculation experiment's setups, rows and finding: the same streams with speculative decoding off and on, at
batch 1, 8, 32 and 128, so the gain at batch 1 (bandwidth bound: a step reads the weights once for several tokens)
and its fall as the batch nears the ridge (the verification's K + 1 tokens a sequence cost compute) show with an interval.

A stream's decode rate is 1 / its mean per-token ITL, so a setup's rate at a batch is judged by the mean ITL over
every stream's tokens, in blocks of consecutive gaps (one draw each). The change is the ratio off / on; its interval
comes from the two means' own (`judge_intervals`), so "×2.3" is "better" only when the intervals do not overlap.

Pure: `tui.sources.workloads.speculation` starts phasetop's simulator in each setup and times the requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from tui.core.measure.chunk_tokens import per_token_gaps
from tui.core.measure.records import RequestTiming
from tui.core.measure.stats import summarize
from tui.core.measure.uncertainty import BETTER, BLOCK_GAPS, TIE, WORSE, Interval, interval, judge_intervals

METHOD = "ngram"
NUM_SPECULATIVE_TOKENS = 3
ACCEPTANCE = 0.7
"""The speculating setup's defaults: an n-gram proposer's 3 drafts a step, each accepted 7 times in 10."""
SIM_LAG_LIMIT_S = 0.005
"""The simulator's emission lag (a chunk written after its simulated time; its `/sim/emission`) past which a row
times this machine, not the engine: at p99 over 5 ms the simulator could not run its steps in real time (on two
cores, 128 streams beside the meter), so its tokens came as fast as the CPU let them, not as the physics says."""
BEHIND = "phasetop's simulator fell behind its clock: this machine's CPU, not the engine, kept out of the finding"


@dataclass(frozen=True, slots=True)
class Setup:
    """One side of the experiment: a key, the row's label, and `phasetop sim`'s flags for it."""

    key: str
    label: str
    sim_args: tuple[str, ...]


def setups(k: int = NUM_SPECULATIVE_TOKENS, acceptance: float = ACCEPTANCE, method: str = METHOD) -> tuple[Setup, Setup]:
    """Speculation off, then on (`method`, `k` drafts a step, each accepted with chance `acceptance`)."""
    return (Setup("off", "no speculation", ()),
            Setup("on", f"{method} {k} drafts, {acceptance:.0%}",
                  ("--speculative", method, "--num-speculative-tokens", str(k), "--acceptance", f"{acceptance:g}")))


def speculation_server(gpu: str, model: str, chosen: Sequence[Setup]) -> dict[str, Any]:
    """The run's `server`: phasetop's simulator on `gpu` with `model`, in each setup (no one server to identify)."""
    return {"kind": "openai", "simulator": "phasetop sim", "gpu": gpu, "model": model,
            "setups": [{"key": s.key, "label": s.label, "sim_args": list(s.sim_args)} for s in chosen]}


def speculation_row(setup: Setup, streams: int, rounds: Sequence[Sequence[RequestTiming]],
                    sim_lag_p99_s: float | None = None) -> dict[str, Any]:
    """One setup at one batch: the streams' decode rate (1 / mean per-token ITL while the whole batch decoded:
    `_steady_gaps`), their tokens a chunk (a speculative step's accepted tokens come in one), with the mean ITL's
    interval over blocks of `BLOCK_GAPS` gaps; a row whose simulator fell behind (`sim_lag_p99_s` over
    `SIM_LAG_LIMIT_S`) has no interval, and says why."""
    done = [t for batch in rounds for t in batch if t.ok and not t.burst]
    steady = [gaps for batch in rounds for gaps in _steady_gaps(batch)]
    mean_itl = summarize([gap for gaps in steady for gap in gaps]).mean
    blocks = [gaps[k:k + BLOCK_GAPS] for gaps in steady for k in range(0, len(gaps), BLOCK_GAPS)]
    per_chunk = [t.mean_tokens_per_chunk for t in done if t.mean_tokens_per_chunk]
    kept = interval(blocks, "mean", mean_itl)
    behind = sim_lag_p99_s is not None and sim_lag_p99_s > SIM_LAG_LIMIT_S
    if behind:
        kept = Interval(None, kept.n, None, BEHIND)
    rate = Interval((1 / kept.ci[1], 1 / kept.ci[0]) if kept.ci and kept.ci[0] > 0 else None, kept.n, kept.more,
                    kept.reason)  # the rate's interval: the mean ITL's, inverted
    return {
        "setup": setup.label,
        "setup_key": setup.key,
        "streams": streams,
        "decode_tok_s": 1 / mean_itl if mean_itl else None,
        "itl_mean_s": mean_itl,
        "tokens_per_chunk": sum(per_chunk) / len(per_chunk) if per_chunk else None,
        "n": len(done),
        "bursts": sum(1 for batch in rounds for t in batch if t.ok and t.burst),
        "sim_lag_p99_s": sim_lag_p99_s,
        "sim_behind": behind,
        "intervals": {"itl_mean_s": kept.to_json(), "decode_tok_s": rate.to_json()},
    }


def _steady_gaps(batch: Sequence[RequestTiming]) -> list[tuple[float, ...]]:
    """Each stream's per-token gaps while every stream of its round was decoding: from the last one's first token to
    the first one's last. The batch is then what it says: before, the later streams' prefills share the steps (a
    step of 2,048 prompt tokens is 13 decode steps long), after, fewer streams run."""
    timed = [t for t in batch if t.ok and t.token_offsets_s]
    if not timed:
        return []
    start = max(t.t_sent_unix + t.token_offsets_s[0] for t in timed)
    end = min(t.t_sent_unix + t.token_offsets_s[-1] for t in timed)
    found = []
    for t in timed:
        if t.burst:
            continue
        inside = [i for i, offset in enumerate(t.token_offsets_s) if start <= t.t_sent_unix + offset <= end]
        if len(inside) < 2:
            continue
        first, last = inside[0], inside[-1] + 1
        offsets, sizes = t.token_offsets_s[first:last], t.chunk_tokens
        theirs = [g - first for g in t.client_gaps if first <= g < last - 1]
        if sizes is None:  # not known one by one: a chunk's gap over the mean a chunk, as `RequestTiming.itl_s` estimates
            mean = t.mean_tokens_per_chunk or 1.0
            found.append(tuple((b - a) / mean for i, (a, b) in enumerate(pairwise(offsets)) if i not in theirs))
        else:
            found.append(per_token_gaps(offsets, sizes[first:last], None, theirs))
    return found


@dataclass(frozen=True, slots=True)
class Gain:
    """Speculation's factor on a stream's decode rate at one batch, with its interval and verdict."""

    streams: int
    factor: float
    low: float | None
    high: float | None
    verdict: str

    def text(self) -> str:
        sure = (f", sure: [×{self.low:.2f} … ×{self.high:.2f}]" if self.verdict in (BETTER, WORSE)
                else ", tie" if self.verdict == TIE else ", not enough requests to tell")
        return f"×{self.factor:.2f} at batch {self.streams}{sure}"

    def to_json(self) -> dict[str, Any]:
        return {"streams": self.streams, "factor": self.factor, "ci_low": self.low, "ci_high": self.high,
                "verdict": self.verdict}


def gains(rows: Sequence[dict[str, Any]]) -> list[Gain]:
    """Per batch measured both ways: the decode rate's factor (mean ITL off / on), judged from the two intervals."""
    off = {r["streams"]: r for r in rows if r["setup_key"] == "off" and r["itl_mean_s"] and not r.get("sim_behind")}
    on = {r["streams"]: r for r in rows if r["setup_key"] == "on" and r["itl_mean_s"] and not r.get("sim_behind")}
    found = []
    for streams in sorted(off.keys() & on.keys()):
        a, b = off[streams], on[streams]
        a_ci, b_ci = Interval.of_row(a, "itl_mean_s"), Interval.of_row(b, "itl_mean_s")
        judged = judge_intervals(a["itl_mean_s"], b["itl_mean_s"], a_ci, b_ci, higher_is_better=False)
        low = high = None
        if a_ci is not None and b_ci is not None and a_ci.ci and b_ci.ci and b_ci.ci[0] > 0:
            low, high = a_ci.ci[0] / b_ci.ci[1], a_ci.ci[1] / b_ci.ci[0]
        found.append(Gain(streams, a["itl_mean_s"] / b["itl_mean_s"], low, high, judged.verdict))
    return found


def speculation_finding(rows: Sequence[dict[str, Any]]) -> tuple[str, list[Gain]]:
    """"speculation ×2.46 at batch 1 (sure …), ×1.9 at batch 8 (…), ×0.81 at batch 32 (…): worth it up to batch 8"."""
    found = gains(rows)
    behind = sorted({r["streams"] for r in rows if r.get("sim_behind")})
    left_out = (f" (batch {', '.join(map(str, behind))} left out: the simulator fell behind its clock, lag p99 "
                f"{max(r['sim_lag_p99_s'] for r in rows if r.get('sim_behind')) * 1e3:.0f} ms, this machine's CPU, "
                "not the engine; slowed, PHASETOP_SIM__TIME_SCALE=4, it keeps up)") if behind else ""
    if not found:
        return f"speculation not measured both ways at any batch{left_out}", []
    line = "speculation " + "; ".join(gain.text() for gain in found)
    worth = [g.streams for g in found if g.verdict == BETTER]
    loss = [g.streams for g in found if g.verdict == WORSE]
    if worth and loss and max(worth) < min(loss):
        return f"{line}: worth it up to batch {max(worth)}, a loss from batch {min(loss)}{left_out}", found
    if worth and len(worth) == len(found):
        return f"{line}: worth it at every batch measured{left_out}", found
    if loss and len(loss) == len(found):
        return f"{line}: a loss at every batch measured{left_out}", found
    return line + left_out, found

