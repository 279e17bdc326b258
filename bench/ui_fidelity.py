"""How exactly the UI's live view times tokens, beside `phasetop bench` on the same load, against the server's truth.

A scripted server (testbeds/scripted_server.py: another process on uvloop) is pinned to the last core where there are
two or more: the core the UI keeps its drawing on (at nice 10, yielding to the server), so the UI's meter reads on
a core of its own; the clients may use every core, as a person's would. The server sends 512 tokens 10 ms apart to
every request and logs, on CLOCK_MONOTONIC, when
each request's first bytes reached it and when it wrote each chunk. The UI runs on a pseudo-terminal (bench/ui.py's
`Terminal`), loaded as a person would, then quits and saves its session as a run; `phasetop bench` then runs the
same load shape against the same server. Each side's saved requests are scored against that log:

  ITL error      |client gap − written gap| per token (median, p99, max), as bench/fidelity.py scores it
  ITL p99        the run's own figure (the UI session's summary, the CLI's figures) beside the truth: the written
                 gaps' p99 over the same requests
  TTFT error     client TTFT − the server's (arrival → first chunk written), as bench/fidelity.py scores it; and on
                 the receive side alone: first chunk read − first chunk written, on the clock both processes share
  CPU            each process of the side's tree (the UI and any child of it that is not the server: its meter
                 process; the CLI) over its load window, first arrival → last write, as % of one core

The load: at 8 streams, keys `1` (200-token prompt) ROUNDS times then `4` (8 at once) ROUNDS times, each once the
previous answer was written; at any other N, N at once ROUNDS times, sent inside the app by bench/ui.py's child on
SIGUSR1, as no key sends N. The CLI runs the same rounds, one `phasetop bench` each, all of a round at once. The
presets' max_tokens (128 for `1`) is not what comes back: the scripted server sends its 512 tokens whatever is asked,
so every request of both sides streams 512.

The runs hold no prompt, so no nonce: a request is matched to the log entry that arrived within a second of its
send (t_sent_unix put on CLOCK_MONOTONIC) whose chunk writes its reads trail most closely (the median over its 512
tokens, never below zero: a chunk is not read before it was written), closest pairs first.

On a shared machine the figures are the shared machine's: each side's CPU rows end with what the rest of the
machine used over the same window.

    .venv/bin/python bench/ui_fidelity.py [--streams 8 32] [--rounds 4] [--size 120x40]

Prints a table per level (UI, CLI, truth), the targets beside the UI's figures and the CLI's, the CPU per process,
then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import httpx
import psutil

from fidelity import ROOT, errors_ms
from sim_emission import pin
from ui import MAX_TOKENS, PROMPT_TOKENS, Terminal, child
from tui.core.runs.run_record import request_figures
from tui.core.measure.stats import percentile

MODEL = "scripted-model"
"""The scripted server's model: on screen once the UI has detected the server."""
TTFT_S, ITL_S = 0.02, 0.01
"""The scripted server's arrival → first token and its gap between tokens."""
SAMPLE_S = 0.1
"""Process CPU is sampled this often; a window's edges are within one sample."""
ARRIVAL_POLL_S = 0.02
LATE_MARGIN_S = 0.03
"""The log is read again this long after the last token was due: reading it holds the server's loop (about 3 ms
for 32 streams' stamps), so it is read before the streams start and after they should have ended, not between."""
MATCH_WINDOW_S = 1.0
"""A log entry can be a request's only if it arrived within this long of the request's send."""
CLOCK_SLACK_S = 0.0005
"""How far a request's reads may seem, in the median, to precede its writes (the wall↔monotonic conversion, a
server preempted between a write and its stamp) before the pairing is impossible."""
TARGETS = {"itl_err_p50_ms": 0.2, "itl_p99_within_pct": 5.0, "ttft_vs_cli_ms": 0.3, "ui_cpu_pct_at_32": 40.0}


@dataclass
class Side:
    """One client's part of a level: its saved requests and figure, the server's log of them, its CPU windows."""

    name: str
    requests: list[dict] = field(default_factory=list)
    reported_itl_p99_s: float | None = None
    log: list[dict] = field(default_factory=list)
    windows: list[tuple[float, float, set[int]]] = field(default_factory=list)
    """(first arrival, last write, the pids this side started) of each of its load phases, in monotonic seconds."""
    note: str = ""


class TreeCpu:
    """This script's process tree sampled on a thread: per process its CPU seconds and its main thread's, and the
    machine's busy seconds, so windows fixed afterwards from the server's log can be cut from the samples."""

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid
        self.samples: list[tuple[float, float, dict[int, tuple[str, float, float]]]] = []
        """(monotonic, machine busy s, pid → (command, CPU s, main thread's CPU s)) every SAMPLE_S."""
        self._labels: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="tree-cpu")
        self._thread.start()

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            sample = {}
            for process in [me, *me.children(recursive=True)]:
                if (read := self._read(process)) is not None:
                    sample[process.pid] = read
            machine = psutil.cpu_times()
            # guest time is inside user already, steal was never ours to use
            busy_s = machine.user + machine.nice + machine.system + getattr(machine, "irq", 0.0) + getattr(machine, "softirq", 0.0)
            self.samples.append((time.monotonic(), busy_s, sample))
            self._stop.wait(SAMPLE_S)

    def _read(self, process: psutil.Process) -> tuple[str, float, float] | None:
        try:
            times = process.cpu_times()
            main = next((t for t in process.threads() if t.id == process.pid), None)
            if process.pid not in self._labels:
                self._labels[process.pid] = short_command(process.cmdline())
        except psutil.Error:
            return None
        return self._labels[process.pid], times.user + times.system, (main.user_time + main.system_time) if main else 0.0

    def used(self, t0: float, t1: float) -> tuple[float, dict[int, tuple[str, float, float]]]:
        """The machine's busy seconds, and the CPU seconds (all threads, main thread) each process used, from t0 to t1."""
        _, busy0, base = next((s for s in reversed(self.samples) if s[0] <= t0), self.samples[0])
        busy, out = 0.0, {}
        for t, busy1, sample in self.samples:
            if t > t1 + SAMPLE_S:
                break
            if t >= t0:
                busy = busy1 - busy0
                for pid, (label, cpu, main) in sample.items():
                    _, cpu0, main0 = base.get(pid, (label, 0.0, 0.0))  # born in the window: all it used
                    out[pid] = (label, cpu - cpu0, main - main0)
        return busy, out

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)


def short_command(argv: list[str]) -> str:
    """A process's command line, short: `python -m tui --url`, `phasetop bench --url`."""
    words = argv[1:] if argv and Path(argv[0]).name.startswith("python") else argv
    words = [Path(words[0]).name, *words[1:]] if words else []
    return " ".join(w if len(w) < 24 else "…" for w in words[:3])


def start_server() -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen([sys.executable, str(ROOT / "testbeds" / "scripted_server.py"), "--tokens", str(MAX_TOKENS),
                               "--itl", str(ITL_S), "--ttft", str(TTFT_S), "--uvloop"], stdout=subprocess.PIPE, text=True)
    return server, server.stdout.readline().strip()


def take_answered(url: str, expected: int, timeout_s: float = 90.0, arrive_s: float = 10.0) -> list[dict]:
    """The server's log once `expected` requests arrived and every token of theirs was written; then a fresh log.
    Nothing arrived within `arrive_s`: the send never went out, said at once rather than after `timeout_s`."""
    started = time.monotonic()
    while True:
        log = httpx.get(url + "/_log", timeout=30).json()
        if len(log) >= expected and all(len(e["content_write_ns"]) == MAX_TOKENS for e in log):
            break
        if time.monotonic() > started + (timeout_s if log else arrive_s):
            raise RuntimeError(f"{len(log)} of {expected} requests arrived, "
                               f"{sum(len(e['content_write_ns']) == MAX_TOKENS for e in log)} answered, in {time.monotonic() - started:.0f} s")
        if len(log) < expected:
            time.sleep(ARRIVAL_POLL_S)
        else:
            due = max(e["received_ns"] for e in log) / 1e9 + TTFT_S + (MAX_TOKENS - 1) * ITL_S + LATE_MARGIN_S
            time.sleep(max(due - time.monotonic(), ARRIVAL_POLL_S))
    return httpx.get(url + "/_log/take", timeout=30).json()


def window_of(log: list[dict], pids: set[int]) -> tuple[float, float, set[int]]:
    """A phase's load window: first request arrived → last chunk written."""
    return (min(e["received_ns"] for e in log) / 1e9, max(e["content_write_ns"][-1] for e in log) / 1e9, pids)


def ui_side(url: str, streams: int, rounds: int, size: tuple[int, int], runs_dir: Path) -> Side:
    """The UI loaded as the level says, quit with `q`; its saved session's requests and ITL p99."""
    os.environ["PHASETOP_RUNS_DIR"] = str(runs_dir)
    if streams == 8:
        argv = [sys.executable, "-m", "tui", "--url", url]
        steps = [(b"1", 1)] * rounds + [(b"4", 8)] * rounds
    else:
        argv = [sys.executable, str(Path(__file__).resolve()), "--child", url, "--child-streams", str(streams)]
        steps = [(None, streams)] * rounds
    terminal = Terminal(argv, watch=(MODEL,), size=size)
    side = Side("UI")
    try:
        terminal.wait_for(MODEL, 30)  # the header names the model: detection is done, a key sends
        for key, expected in steps:
            if key is None:
                terminal.process.send_signal(signal.SIGUSR1)
            else:
                terminal.press(key)
            try:
                phase = take_answered(url, expected)
            except RuntimeError as error:
                exited = terminal.process.poll()
                raise RuntimeError(f"{error} after {key or 'SIGUSR1'!r}; the UI "
                                   f"{'is running' if exited is None else f'exited {exited}'}") from None
            side.log += phase
            side.windows.append(window_of(phase, {terminal.process.pid}))
    finally:
        status = terminal.quit()
    if status != 0:
        raise RuntimeError(f"the UI exited {status} on q")
    sessions = [run for path in sorted(runs_dir.glob("*.json"))
                if (run := json.loads(path.read_text())).get("params", {}).get("source") == "ui session"]
    if not sessions:
        raise RuntimeError(f"the UI saved no session run in {runs_dir}")
    side.requests = [r for run in sessions for r in run["requests"]]
    summary = sessions[-1]["result"]["summary"]
    side.reported_itl_p99_s = summary["itl_s"]["p99"] if len(sessions) == 1 else request_figures(side.requests)["itl_s"]["p99"]
    side.note = (f"{len(sessions)} session(s); {summary.get('bursts_excluded', 0)} request(s) marked and left out of the "
                 f"figures{why_marked(side.requests)}; {'a sample' if 'requests_sample' in sessions[-1] else 'all'} saved; "
                 f"exit {status}; {sum(len(r.get('client_gaps') or ()) for r in side.requests)} gaps the meter's own")
    return side


def why_marked(requests: list[dict]) -> str:
    """" (12: its first chunk was read late, 3: …)": the marks' reasons, counted by their kind (the words before a
    figure or a colon)."""
    kinds = Counter(r["burst"].split(":")[0].split("(")[0].strip() for r in requests if r.get("burst"))
    return f" ({', '.join(f'{n}: {kind}' for kind, n in kinds.most_common())})" if kinds else ""


def cli_side(url: str, streams: int, rounds: int, runs_dir: Path) -> Side:
    """`phasetop bench` on the same shape: one invocation per round of the UI's load, each all at once (a burst of
    N arrives at the server as the UI's does: the server's own reading of a burst is in both sides' TTFT)."""
    phases = [(1, 1)] * rounds + [(8, 8)] * rounds if streams == 8 else [(streams, streams)] * rounds
    side, documents = Side("CLI"), []
    for index, (concurrency, count) in enumerate(phases):
        save = runs_dir / f"cli-{index}.json"
        process = subprocess.Popen(
            [str(Path(sys.executable).with_name("phasetop")), "bench", "--url", url, "--num-prompts", str(count),
             "--max-concurrency", str(concurrency), "--prompt-tokens", str(PROMPT_TOKENS), "--max-tokens", str(MAX_TOKENS),
             "--save", str(save)],
            env={**os.environ, "PHASETOP_RUNS_DIR": str(runs_dir)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _, stderr = process.communicate(timeout=120)
        if process.returncode != 0:
            raise RuntimeError(f"phasetop bench exited {process.returncode}: {stderr[-500:]}")
        phase = take_answered(url, count, timeout_s=5)
        side.log += phase
        side.windows.append(window_of(phase, {process.pid}))
        documents.append(json.loads(save.read_text()))
    side.requests = [r for d in documents for r in d["requests"]]
    # One invocation reports its own figure; over several, the figure one bench of them all would report.
    side.reported_itl_p99_s = (documents[0]["figures"]["itl_s"]["p99"] if len(documents) == 1
                               else request_figures(side.requests)["itl_s"]["p99"])
    side.note = " + ".join(f"{phases.count(phase)} × {phase[1]} at once" for phase in dict.fromkeys(phases))
    return side


def mono_minus_unix() -> float:
    """CLOCK_MONOTONIC − the wall clock, from the tightest of a few back-to-back reads: puts a run's t_sent_unix on
    the server log's clock, which every process on the machine shares."""
    reads = []
    for _ in range(20):
        a, unix, b = time.perf_counter_ns(), time.time_ns(), time.perf_counter_ns()
        reads.append((b - a, (a + b) / 2e9 - unix / 1e9))
    return min(reads)[1]


def match(requests: list[dict], log: list[dict], offset_s: float) -> list[tuple[dict, dict]]:
    """Each saved request paired with its log entry: of those that arrived near its send, the one whose writes its
    reads trail most closely (the median over its tokens, not below zero), closest pairs first."""
    pairs = []
    for i, request in enumerate(requests):
        sent = request["t_sent_unix"] + offset_s
        offsets = request["token_offsets_s"]
        for j, entry in enumerate(log):
            writes = entry["content_write_ns"]
            if len(writes) != len(offsets) or abs(entry["received_ns"] / 1e9 - sent) > MATCH_WINDOW_S:
                continue
            lag_s = statistics.median(sent + o - w / 1e9 for o, w in zip(offsets, writes))
            if lag_s >= -CLOCK_SLACK_S:
                pairs.append((lag_s, i, j))
    matched, used_requests, used_entries = [], set(), set()
    for _, i, j in sorted(pairs):
        if i not in used_requests and j not in used_entries:
            used_requests.add(i)
            used_entries.add(j)
            matched.append((requests[i], log[j]))
    return matched


def score(side: Side, tree: TreeCpu, offset_s: float) -> dict:
    """The side's figures against the log; its CPU per process over its load windows."""
    pairs = match(side.requests, side.log, offset_s)
    if not pairs:
        raise RuntimeError(f"{side.name}: no request matched the server's log")
    ttft, itl = errors_ms({entry["nonce"]: request["token_offsets_s"] for request, entry in pairs}, [e for _, e in pairs])
    received = [(r["t_sent_unix"] + offset_s + r["token_offsets_s"][0] - e["content_write_ns"][0] / 1e9) * 1e3 for r, e in pairs]
    written = sorted((b - a) / 1e9 for _, e in pairs for a, b in pairwise(e["content_write_ns"]))
    kept_itl = sorted(abs(x) for x in kept_gap_errors_ms(pairs))
    abs_itl, ttft, received = sorted(abs(x) for x in itl), sorted(ttft), sorted(received)
    truth_p99_s = percentile(written, 99)
    # The run's figures leave out requests it marked (timed while the client was busy): their truth, apart.
    kept = sorted((b - a) / 1e9 for r, e in pairs if r.get("ok") and not r.get("burst") for a, b in pairwise(e["content_write_ns"]))
    return {
        "side": side.name, "requests": len(side.requests), "matched": len(pairs), "logged": len(side.log),
        "itl_err_p50_ms": percentile(abs_itl, 50), "itl_err_p99_ms": percentile(abs_itl, 99), "itl_err_max_ms": abs_itl[-1],
        "itl_err_kept_p99_ms": percentile(kept_itl, 99) if kept_itl else None,
        "itl_err_kept_max_ms": kept_itl[-1] if kept_itl else None,
        "itl_p99_reported_ms": side.reported_itl_p99_s * 1e3 if side.reported_itl_p99_s is not None else None,
        "itl_p99_truth_ms": truth_p99_s * 1e3,
        "itl_p99_truth_kept_ms": percentile(kept, 99) * 1e3 if kept else None,
        "kept": sum(1 for r, _ in pairs if r.get("ok") and not r.get("burst")),
        "itl_p99_off_pct": 100 * (side.reported_itl_p99_s - truth_p99_s) / truth_p99_s if side.reported_itl_p99_s else None,
        "ttft_err_p50_ms": percentile(ttft, 50), "ttft_err_p99_ms": percentile(ttft, 99),
        "ttft_recv_err_p50_ms": percentile(received, 50), "ttft_recv_err_p99_ms": percentile(received, 99),
        "cpu": cpu_of(side, tree), "load_1m": round(os.getloadavg()[0], 2), "note": side.note,
    }


def kept_gap_errors_ms(pairs: list[tuple[dict, dict]]) -> list[float]:
    """Per-gap errors of the gaps the run's figures keep: its requests not marked, less the gaps the meter found its
    own (`client_gaps`)."""
    errors = []
    for request, entry in pairs:
        if not request.get("ok") or request.get("burst"):
            continue
        theirs = set(request.get("client_gaps") or ())
        offsets, writes = request["token_offsets_s"], [w / 1e9 for w in entry["content_write_ns"]]
        errors += [((offsets[i + 1] - offsets[i]) - (writes[i + 1] - writes[i])) * 1e3
                   for i in range(len(offsets) - 1) if i not in theirs]
    return errors


def cpu_of(side: Side, tree: TreeCpu) -> list[dict]:
    """% of a core per process over the side's windows: its own processes, their children, the server, this script,
    and what the rest of the machine used meanwhile (a shared machine shows as one)."""
    totals: dict[str, list[float]] = {}
    wall = others = 0.0
    for t0, t1, pids in side.windows:
        wall += t1 - t0
        busy, used = tree.used(t0, t1)
        others += busy - sum(cpu for _, cpu, _ in used.values())
        for pid, (label, cpu, main) in used.items():
            role = (f"{side.name} process" if pid in pids else "server" if pid == tree.server_pid
                    else "this script" if pid == os.getpid() else f"{side.name} child")
            total = totals.setdefault(f"{role}: {label}", [0.0, 0.0])
            total[0] += cpu
            total[1] += main
    rows = [{"process": name, "cpu_pct": round(100 * cpu / wall, 1), "main_thread_pct": round(100 * main / wall, 1)}
            for name, (cpu, main) in totals.items()]
    # max(0, …): the window's edges are a sample apart, so on a quiet machine the rest can read a point below zero
    return rows + [{"process": "others: the rest of the machine", "cpu_pct": round(max(0.0, 100 * others / wall), 1),
                    "main_thread_pct": None}]


def level(url: str, streams: int, rounds: int, size: tuple[int, int], tree: TreeCpu, offset_s: float) -> dict:
    """One level: the UI, then the CLI, on one server; each scored against its own part of the log."""
    httpx.get(url + "/_log/take", timeout=30)
    with tempfile.TemporaryDirectory(prefix="phasetop-ui-fidelity-") as tmp:
        ui_runs, cli_runs = Path(tmp, "ui"), Path(tmp, "cli")
        ui_runs.mkdir()
        cli_runs.mkdir()
        ui = score(ui_side(url, streams, rounds, size, ui_runs), tree, offset_s)
        cli = score(cli_side(url, streams, rounds, cli_runs), tree, offset_s)
    return {"streams": streams, "rounds": rounds, "ui": ui, "cli": cli, "checks": checks(streams, ui, cli)}


def checks(streams: int, ui: dict, cli: dict) -> list[dict]:
    """Each target beside the UI's figure and the CLI's from the same run."""
    rows = [("per-token ITL err p50", f"≤ {TARGETS['itl_err_p50_ms']} ms", ui["itl_err_p50_ms"], cli["itl_err_p50_ms"],
             ui["itl_err_p50_ms"] <= TARGETS["itl_err_p50_ms"], "ms"),
            ("ITL p99 reported vs truth", f"within {TARGETS['itl_p99_within_pct']:g} %", ui["itl_p99_off_pct"],
             cli["itl_p99_off_pct"], ui["itl_p99_off_pct"] is not None and abs(ui["itl_p99_off_pct"]) <= TARGETS["itl_p99_within_pct"], "%")]
    for key, name in (("ttft_err_p50_ms", "TTFT err p50"), ("ttft_recv_err_p50_ms", "TTFT recv-side err p50")):
        rows.append((name, f"≤ CLI's + {TARGETS['ttft_vs_cli_ms']} ms", ui[key], cli[key],
                     ui[key] <= cli[key] + TARGETS["ttft_vs_cli_ms"], "ms"))
    out = [{"target": n, "wanted": w, "ui": u, "cli": c, "met": m, "unit": unit} for n, w, u, c, m, unit in rows]
    if streams >= 32:
        own = next(p for p in ui["cpu"] if p["process"].startswith("UI process"))
        children = [p for p in ui["cpu"] if p["process"].startswith("UI child")]
        beside = (f"the measuring process beside it: {' + '.join(p['process'] for p in children)}, "
                  f"{sum(p['cpu_pct'] for p in children):.1f} %" if children else
                  f"no measuring process: the UI reads the streams itself (threads besides its main: "
                  f"{own['cpu_pct'] - own['main_thread_pct']:.1f} %)")
        out.append({"target": "UI (render) process CPU", "wanted": f"≤ {TARGETS['ui_cpu_pct_at_32']:g} % of a core",
                    "ui": own["cpu_pct"], "cli": next((p["cpu_pct"] for p in cli["cpu"] if p["process"].startswith("CLI process")), None),
                    "met": own["cpu_pct"] <= TARGETS["ui_cpu_pct_at_32"], "unit": "%", "beside": beside})
    return out


def _f(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_level(result: dict, size: tuple[int, int]) -> None:
    ui, cli, streams = result["ui"], result["cli"], result["streams"]
    shape = (f"keys 1 ×{result['rounds']}, then 4 ×{result['rounds']}" if streams == 8
             else f"{streams} at once ×{result['rounds']} (SIGUSR1 in the app)")
    print(f"\n{streams} streams — UI: {shape}, {size[0]}x{size[1]}; CLI: {cli['note']}; {PROMPT_TOKENS} in, "
          f"{MAX_TOKENS} out, a token every {ITL_S * 1e3:g} ms")
    print(f"{'':<6} {'req':>4} {'ITL err p50':>11} {'p99':>6} {'max':>6} {'ITL p99 as reported':>20} "
          f"{'TTFT err p50':>12} {'p99':>6} {'recv-side p50':>13} {'p99':>6} {'CPU':>6} {'load':>5}")
    for name, row in (("UI", ui), ("CLI", cli)):
        own = next((p["cpu_pct"] for p in row["cpu"] if p["process"].startswith(f"{name} process")), None)
        print(f"{name:<6} {row['matched']:>4} {_f(row['itl_err_p50_ms']):>8} ms {_f(row['itl_err_p99_ms']):>6} "
              f"{_f(row['itl_err_max_ms'], 1):>6} {_f(row['itl_p99_reported_ms'], 1):>14} ms{'':>4} "
              f"{_f(row['ttft_err_p50_ms']):>9} ms {_f(row['ttft_err_p99_ms']):>6} {_f(row['ttft_recv_err_p50_ms']):>10} ms "
              f"{_f(row['ttft_recv_err_p99_ms']):>6} {_f(own, 0):>5}% {row['load_1m']:>5.2f}")
    truth = f"{ui['itl_p99_truth_ms']:.1f} / {cli['itl_p99_truth_ms']:.1f}"
    print(f"{'truth':<6} {'':>4} {'-':>11} {'':>6} {'':>6} {truth:>14} ms  (written gaps' p99: UI's load / CLI's)")
    print(f"{'target':<28} {'wanted':<22} {'UI':>8} {'CLI':>8}  met")
    for c in result["checks"]:
        print(f"{c['target']:<28} {c['wanted']:<22} {_f(c['ui']):>8} {_f(c['cli']):>8}  {'met' if c['met'] else 'NOT'}  ({c['unit']})"
              + (f"; {c['beside']}" if "beside" in c else ""))
    for row in (ui, cli):
        processes = "; ".join(f"{p['process']} {p['cpu_pct']:.1f} %" + ("" if p["main_thread_pct"] is None else
                              f" (main thread {p['main_thread_pct']:.1f} %)") for p in row["cpu"])
        children = [p for p in row["cpu"] if " child" in p["process"]]
        print(f"CPU over the {row['side']}'s load window: {processes}"
              + ("" if children else f"; no {row['side']} child (the streams are read in its own process)"))
    print(f"UI run: {ui['note']}; matched {ui['matched']} of {ui['requests']} saved / {ui['logged']} logged; "
          f"CLI: matched {cli['matched']} of {cli['requests']} / {cli['logged']}")
    print(f"truth over only the requests the figures kept (not marked): UI {_f(ui['itl_p99_truth_kept_ms'], 1)} ms "
          f"({ui['kept']}), CLI {_f(cli['itl_p99_truth_kept_ms'], 1)} ms ({cli['kept']}); ITL error of the gaps the "
          f"figures keep (not the meter's own): UI p99 {_f(ui['itl_err_kept_p99_ms'], 2)} max {_f(ui['itl_err_kept_max_ms'], 1)} "
          f"ms, CLI p99 {_f(cli['itl_err_kept_p99_ms'], 2)} max {_f(cli['itl_err_kept_max_ms'], 1)} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[8, 32], help="levels: 8 drives keys 1 and 4; any other N, N at once")
    parser.add_argument("--rounds", type=int, default=4, help="presses of each key at 8, rounds of N at once otherwise (default 4)")
    parser.add_argument("--size", default="120x40", help="the UI's terminal, COLSxROWS (default 120x40)")
    parser.add_argument("--child", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--child-streams", type=int, default=32, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.child_streams, rounds=1)  # one round a signal: each starts once the last was answered
        return 0
    size = tuple(int(v) for v in args.size.lower().split("x"))
    load_before = round(os.getloadavg()[0], 2)
    server, url = start_server()
    last = max(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
    pinned = (os.cpu_count() or 1) > 1 and pin(server.pid, last)
    tree = TreeCpu(server.pid)
    offset_s = mono_minus_unix()
    try:
        results = [level(url, streams, args.rounds, size, tree, offset_s) for streams in args.streams]
    finally:
        tree.stop()
        server.terminate()
        server.wait(10)
    print(f"scripted server on uvloop, pinned to core {last}, the UI's drawing core (the UI's meter, the CLI and this "
          f"script on any core): {pinned}; "
          f"{os.cpu_count()} cores; load 1m {load_before} before")
    for result in results:
        print_level(result, size)
    print(json.dumps({"bench": "ui_fidelity", "size": list(size), "rounds": args.rounds, "prompt_tokens": PROMPT_TOKENS,
                      "tokens": MAX_TOKENS, "itl_s": ITL_S, "pinned": pinned, "load_1m_before": load_before, "levels": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
