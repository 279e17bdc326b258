"""The UI's memory over 10M streamed tokens: RSS at intervals, through the app's own data path, as fast as it goes.

10M real tokens take hours on this machine (the simulator and the client reading it hold ~5,000 tok/s
on two cores), so this drives what they would deliver, synthetically, through the same code:
- the main screen: `RequestStarted`, the `TokenBatch`es the feed's own `TokenBatches` posts (every 16
  tokens, 32 streams at once, the shown lanes in full and the rest summed up), and `RequestCompleted`
  with each request's exact record (512 offsets and its text), into the app running headless at
  120×40 (so the handlers, the session, the timeline, its figures and the prompt pane all run);
- the load dial's endless path: every request also goes into an `EndlessRecord`, as `LoadRunner` keeps
  an endless run (figures over all, a sample of the raw requests), as 8 requests of 64 tokens each.

RSS is psutil's, of this process, printed every `--every` tokens; the figure to read is the growth
from the warm-up mark (the first interval) to the end. The target: flat after warm-up, ≤ 150 MB at 10M.

    .venv/bin/python bench/ui_memory.py [--tokens 10000000] [--every 1000000]

Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tui.app.app import PhasetopApp  # noqa: E402
from tui.app.feeds.requests import SHOWN_LANES, TokenBatches  # noqa: E402
from tui.app.messages import RequestCompleted, RequestStarted, ServerCameUp  # noqa: E402
from tui.config import Settings  # noqa: E402
from tui.core.measure.aggregates import EndlessRecord  # noqa: E402
from tui.core.measure.records import RequestTiming, ServerSplit  # noqa: E402
from tui.sources.workloads.load import ENDLESS_SAMPLE  # noqa: E402

STREAMS = 32
OUT_TOKENS = 512
BATCH_TOKENS = 16
"""Tokens per stream between two batches: 50 ms of 32 streams at ~5,000 tok/s is about 8; 16 halves the posts."""
PAUSE_EVERY = 8
"""Batches posted between two pauses (the screen publishes once per pause, as it does per burst live)."""
LOAD_TOKENS = 64
TARGET_MB = 150
WORD = "token "


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 1e6


def timing(t_sent: float, rng: random.Random, tokens: int) -> RequestTiming:
    """A request as `measure` records it: TTFT ~20 ms, then a token every ~5 ms with jitter, and its text."""
    offsets, t = [], 0.02 + rng.random() * 0.01
    for _ in range(tokens):
        offsets.append(t)
        t += 0.005 * (0.8 + 0.4 * rng.random())
    return RequestTiming(ok=True, t_sent_unix=t_sent, token_offsets_s=tuple(offsets), prompt_tokens=200,
                         output_tokens=tokens,
                         server_split=ServerSplit(prefill_s=0.015, decode_s=t - 0.02, prompt_tokens=200, output_tokens=tokens),
                         text=WORD * tokens)


async def drive(total_tokens: int, every: int) -> dict:
    rng = random.Random(1)
    app = PhasetopApp(Settings(_env_file=None), "http://127.0.0.1:9", "synthetic", (209.0, 131072.0, 16e9), live=False)
    endless = EndlessRecord(ENDLESS_SAMPLE, random.Random(2))
    marks: list[dict] = []
    started = time.monotonic()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        while type(screen).__name__ != "MainScreen":
            await pilot.pause()
            screen = app.screen
        screen.post_message(ServerCameUp("openai", "synthetic-8b", 131072, "0", None, False))
        await pilot.pause()
        marks.append({"tokens": 0, "rss_mb": round(rss_mb(), 1), "s": 0.0})
        streamed, next_id, load_index = 0, 1, 0
        while streamed < total_tokens:
            first, last = next_id, next_id + STREAMS - 1
            next_id += STREAMS
            t_sent = time.time()
            records = {i: timing(t_sent, rng, OUT_TOKENS) for i in range(first, last + 1)}
            for i in records:
                screen.post_message(RequestStarted(i, f"bench {i - first + 1}", t_sent, 200))
            batches = TokenBatches(screen.post_message, range(max(first, last - SHOWN_LANES + 1), last + 1), last)
            for start in range(0, OUT_TOKENS, BATCH_TOKENS):
                for i, record in records.items():  # as a meter's frame brings them: a lane's chunks at once
                    offsets = record.token_offsets_s[start:start + BATCH_TOKENS]
                    batches.add(i, offsets, WORD * len(offsets))
                batches.post()
                if (start // BATCH_TOKENS) % PAUSE_EVERY == PAUSE_EVERY - 1:
                    await pilot.pause()  # the screen handles what is queued, publishes once, and renders
            for i, record in records.items():
                screen.post_message(RequestCompleted(i, record))
                # The load dial's endless path sees the same tokens, as requests of its own size.
                for part in range(OUT_TOKENS // LOAD_TOKENS):
                    offsets = record.token_offsets_s[part * LOAD_TOKENS:(part + 1) * LOAD_TOKENS]
                    endless.add(load_index, RequestTiming(ok=True, t_sent_unix=t_sent, token_offsets_s=offsets,
                                                          prompt_tokens=200, output_tokens=LOAD_TOKENS, text=WORD * LOAD_TOKENS))
                    load_index += 1
                endless.settle(t_sent - 1.0)
            await pilot.pause()
            before = streamed
            streamed += STREAMS * OUT_TOKENS
            if streamed // every != before // every or streamed >= total_tokens:
                marks.append({"tokens": streamed, "rss_mb": round(rss_mb(), 1), "s": round(time.monotonic() - started, 1),
                              "load_avg_1m": round(os.getloadavg()[0], 2)})
                print(f"{streamed:>12,} tokens  RSS {marks[-1]['rss_mb']:7.1f} MB  {marks[-1]['s']:7.1f} s  "
                      f"load 1m {marks[-1]['load_avg_1m']:.2f}", file=sys.stderr, flush=True)
        session = screen.lab.sessions.current
        kept = {
            "timeline_requests": len(screen.state),
            "session_requests_kept": len(session.requests),
            "session_requests_seen": session.request_count,
            "load_requests_kept": len(endless.sample),
            "load_requests_seen": endless.total,
            "load_peak_pending_events": len(endless.figures.peak),
            "answer_lines": len(screen.query_one("#answer").lines),
        }
    return {"marks": marks, "kept": kept}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=10_000_000, help="tokens streamed in all (default 10M)")
    parser.add_argument("--every", type=int, default=1_000_000, help="RSS printed every this many tokens (default 1M)")
    args = parser.parse_args()
    result = asyncio.run(drive(args.tokens, args.every))
    marks = result["marks"]
    warm = marks[1] if len(marks) > 2 else marks[0]
    end = marks[-1]
    growth = end["rss_mb"] - warm["rss_mb"]
    per_100k = 1e5 * growth / max(end["tokens"] - warm["tokens"], 1)
    print(f"{'tokens':>12} {'RSS MB':>8} {'s':>7} {'load 1m':>8}")
    for mark in marks:
        print(f"{mark['tokens']:>12,} {mark['rss_mb']:>8.1f} {mark['s']:>7.1f} {mark.get('load_avg_1m', 0):>8.2f}")
    print(f"RSS at {end['tokens']:,} tokens: {end['rss_mb']:.1f} MB (target ≤ {TARGET_MB} MB: "
          f"{'met' if end['rss_mb'] <= TARGET_MB else 'NOT met'}); after warm-up ({warm['tokens']:,} tokens, "
          f"{warm['rss_mb']:.1f} MB): {growth:+.1f} MB, {per_100k:+.2f} MB per 100k tokens (before this work: +5.5)")
    print("kept: " + ", ".join(f"{k} {v:,}" for k, v in result["kept"].items()))
    print(json.dumps({"bench": "ui_memory", "tokens": end["tokens"], "rss_end_mb": end["rss_mb"], "rss_warm_mb": warm["rss_mb"],
                      "growth_mb_per_100k_tokens": round(per_100k, 3), "target_mb": TARGET_MB, **result}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
