"""The UI under load: frames painted per second, CPU, idle CPU, and time to first paint.

Method. The app runs in its own process on a pseudo-terminal that this script reads, as a
terminal would. The script answers Textual's DECRQM query for mode 2026 ("synchronized output")
as supporting it, so Textual wraps every frame it writes in `ESC[?2026h … ESC[?2026l`; counting
the closing markers counts the frames actually written to the terminal, not refreshes asked for
(Textual merges those) and not widget renders. CPU is the app process's user + system time from
psutil over each window, as a share of one core (100 % = one core busy), with the main thread
(Textual's loop: messages, layout, rendering) split from the rest (the NVML/psutil poll thread), and
beside it the UI's meter process (`python -m tui.meter`, which reads and stamps the streams).

Figures:
  first paint: process start (just before `python -m tui --url URL` is spawned) → the first output
    that shows the header (the server URL), median of several launches; each is then quit with `q`.
  idle: the app is up (header shows the model), no requests; the /metrics and GPU/host polls run.
  load: 32 streams sent by the app itself (the `send_requests` worker, in rounds of 32: a new round
    starts as soon as the last one ends); frames/s and CPU over the window, and the simulator's own
    generation-token rate over the same window (its /metrics counter), so the load is measured too.

The aggregate is set by the simulator's physics: its defaults (H100 SXM + 8B at 16 bit,
`--time-scale 1`), 200-token prompts and 512 tokens out decode about 5,900 tokens/s over 32 streams
(5 ms steps); the gaps between rounds and this machine's two cores bring what arrives to about 5,000.

    .venv/bin/python bench/ui.py [--window 15] [--idle 20] [--launches 5] [--time-scale 1] [--profile FILE]

Prints a table, each target beside its measured figure, then one JSON line. The same run's reference
is printed with them: the 1-minute load average beside each figure and before the simulator started,
and the cores busy machine-wide besides the UI in each window (the simulator, and any other work), so
a busy machine shows as busy: on a shared machine the figures are upper bounds. `--profile` writes
py-spy's collapsed stacks of the app (every thread) over the load window.

Memory over 10M tokens is `bench/ui_memory.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import itertools
import json
import os
import re
import signal
import statistics
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import httpx
import psutil

from tui.core.telemetry.metric_names import read_scrape

ROOT = Path(__file__).resolve().parents[1]
SIZE = (120, 40)
STREAMS = 32
PROMPT_TOKENS = 200
MAX_TOKENS = 512
SYNC_QUERY = b"\x1b[?2026$p"
SYNC_REPLY = b"\x1b[?2026;2$y"
"""DECRPM: mode 2026 is supported (currently reset); Textual then brackets each frame."""
SYNC_END = b"\x1b[?2026l"
ESCAPES = re.compile(r"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")
KEEP_OUTPUT_BYTES = 4 << 20
"""Output is kept (to look for text) only this far; frames are counted throughout."""


class Terminal:
    """A pseudo-terminal running one command: counts frames and notes when given text first shows."""

    def __init__(self, argv: list[str], watch: tuple[str, ...], size: tuple[int, int] = SIZE) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor", "PYTHONUNBUFFERED": "1"}
        env.pop("NO_COLOR", None)
        self.started = time.monotonic()
        self.process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT,
                                        preexec_fn=_controlling_tty, close_fds=True)
        os.close(slave)
        self.master = master
        self.frames: list[float] = []
        """monotonic() of each frame's end marker as read."""
        self.seen: dict[str, float] = {}
        """Watched text → monotonic() when it first showed."""
        self._watch = watch
        self._output = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True, name="pty-reader")
        self._reader.start()

    def _read(self) -> None:
        tail, answered = b"", False
        while True:
            try:
                data = os.read(self.master, 1 << 16)
            except OSError:  # EIO: the child closed the terminal
                return
            if not data:
                return
            now = time.monotonic()
            joined = tail + data
            if not answered and SYNC_QUERY in joined:
                os.write(self.master, SYNC_REPLY)
                answered = True
            self.frames.extend([now] * joined.count(SYNC_END))
            tail = joined[-(len(SYNC_END) - 1):]
            if len(self._output) < KEEP_OUTPUT_BYTES and len(self.seen) < len(self._watch):
                self._output += data
                text = ESCAPES.sub("", self._output.decode(errors="replace"))
                for wanted in self._watch:
                    if wanted not in self.seen and wanted in text:
                        self.seen[wanted] = now

    def wait_for(self, text: str, timeout_s: float) -> float:
        """Seconds from spawn to when `text` first showed."""
        deadline = time.monotonic() + timeout_s
        while text not in self.seen:
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"{text!r} did not show within {timeout_s:g} s (exit {self.process.poll()})")
            time.sleep(0.005)
        return self.seen[text] - self.started

    def press(self, key: bytes) -> None:
        os.write(self.master, key)

    def quit(self, timeout_s: float = 30.0) -> int:
        """Press `q`; the exit status (killed after the timeout)."""
        self.press(b"q")
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
        finally:
            self._reader.join(2)
            os.close(self.master)


def _controlling_tty() -> None:
    """In the child: a session of its own with the pty as its controlling terminal, as a shell gives."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class CpuWindow:
    """CPU of one process (main thread and the rest) and frames over a window of wall time."""

    def __init__(self, process: psutil.Process, terminal: Terminal) -> None:
        self.process, self.terminal = process, terminal
        self.t0 = time.monotonic()
        self.cpu0, self.main0 = self._cpu()
        self.meter0 = self._meters()
        self.machine0 = psutil.cpu_times()
        self.frames0 = len(terminal.frames)

    def _cpu(self) -> tuple[float, float]:
        times = self.process.cpu_times()
        main = next((t for t in self.process.threads() if t.id == self.process.pid), None)
        return times.user + times.system, (main.user_time + main.system_time) if main else 0.0

    def _meters(self) -> dict[int, float]:
        """CPU seconds of each of the UI's meter processes."""
        out = {}
        for child in self.process.children(recursive=True):
            try:
                if "tui.meter" in " ".join(child.cmdline()):
                    times = child.cpu_times()
                    out[child.pid] = times.user + times.system
            except psutil.Error:
                continue
        return out

    def close(self) -> dict:
        wall = time.monotonic() - self.t0
        cpu, main = self._cpu()
        meters = self._meters()
        meter_s = sum(cpu_s - self.meter0.get(pid, 0.0) for pid, cpu_s in meters.items())
        machine1 = psutil.cpu_times()
        idle_s = (machine1.idle + getattr(machine1, "iowait", 0)) - (self.machine0.idle + getattr(self.machine0, "iowait", 0))
        frames = [t for t in self.terminal.frames[self.frames0:] if t >= self.t0]
        gaps = [b - a for a, b in zip(frames, frames[1:])]
        return {
            "wall_s": round(wall, 2),
            "frames_per_s": round(len(frames) / wall, 1),
            "frame_gap_p50_ms": round(statistics.median(gaps) * 1e3, 1) if gaps else None,
            "frame_gap_max_ms": round(max(gaps) * 1e3, 1) if gaps else None,
            "cpu_pct_of_core": round(100 * (cpu - self.cpu0) / wall, 1),
            "main_thread_cpu_pct": round(100 * (main - self.main0) / wall, 1),
            "meter_cpu_pct": round(100 * meter_s / wall, 1),
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "machine_busy_cores": round(os.cpu_count() - idle_s / wall, 2),
            # cores busy machine-wide over the window (this app, the simulator, other work), and without this app
            "others_busy_cores": round(os.cpu_count() - idle_s / wall - (cpu - self.cpu0) / wall - meter_s / wall, 2),
        }


def first_paint(url: str, launches: int) -> dict:
    """Median seconds from spawn to the header on screen, over several launches of `python -m tui`."""
    times = []
    for _ in range(launches):
        terminal = Terminal([sys.executable, "-m", "tui", "--url", url], watch=(url,))
        times.append(terminal.wait_for(url, 30))
        time.sleep(0.5)
        status = terminal.quit()
        if status != 0:
            raise RuntimeError(f"python -m tui exited {status} on q")
    return {"launches": launches, "median_s": round(statistics.median(times), 3),
            "min_s": round(min(times), 3), "max_s": round(max(times), 3), "load_avg_1m": round(os.getloadavg()[0], 2)}


async def generation(url: str) -> tuple[float, float | None]:
    """The simulator's generation-token counter and running requests, from its /metrics."""
    async with httpx.AsyncClient(base_url=url) as client:
        reading = read_scrape((await client.get("/metrics")).text, time.monotonic(), time.time())
    return reading.counters.get("generation_tokens_total", 0.0), reading.gauges.get("running")


def app_under_load(url: str, idle_s: float, window_s: float, profile: str | None = None) -> dict:
    """Idle window, then 32 streams: frames, CPU, and the tokens/s the simulator generated meanwhile.

    `profile`: a file for py-spy's collapsed stacks of the app over the load window (every thread).
    """
    terminal = Terminal([sys.executable, str(Path(__file__).resolve()), "--child", url], watch=("max_model_len",))
    process = psutil.Process(terminal.process.pid)
    try:
        terminal.wait_for("max_model_len", 30)  # the header names the model: detection is done
        time.sleep(2)  # the first scrapes and samples settle
        idle = CpuWindow(process, terminal)
        time.sleep(idle_s)
        idle_figures = idle.close()
        terminal.process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 30
        while asyncio.run(generation(url))[1] != STREAMS:
            if time.monotonic() > deadline:
                raise RuntimeError("the 32 streams did not start")
            time.sleep(0.1)
        tokens0, t0 = asyncio.run(generation(url))[0], time.monotonic()
        load = CpuWindow(process, terminal)
        spy = None
        if profile:
            spy = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(process.pid),
                                    "--duration", str(int(window_s)), "--format", "raw", "--threads", "--rate", "200",
                                    "--output", profile, "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(window_s)
        load_figures = load.close()
        if spy is not None:
            spy.wait(30)
        tokens1, t1 = asyncio.run(generation(url))[0], time.monotonic()
        load_figures["generated_tok_s"] = round((tokens1 - tokens0) / (t1 - t0))
    finally:
        status = terminal.quit()
    return {"idle": idle_figures, "load": load_figures, "exit_status": status}


def child(url: str, streams: int = STREAMS, rounds: int | None = None) -> None:
    """The app as `phasetop --url URL` runs it, plus SIGUSR1: `streams` at once in rounds, `rounds` of them (None: endless)."""
    from tui.app.app import PhasetopApp
    from tui.app.launch import draw_apart, run_app
    from tui.config import Settings
    from tui.core.measure.sends import Send

    class LoadedApp(PhasetopApp):
        CSS_PATH = str(Path(sys.modules[PhasetopApp.__module__].__file__).with_name("phasetop.tcss"))

        def on_mount(self) -> None:
            super().on_mount()
            asyncio.get_running_loop().add_signal_handler(
                signal.SIGUSR1, lambda: self.run_worker(self._rounds(), group="bench", exit_on_error=False))

        next_id = 1_000_000
        """The next request id: above any the screen hands out, and never reused by a later signal's rounds."""

        async def _rounds(self) -> None:
            for _ in itertools.count() if rounds is None else range(rounds):
                worker = self._main.send_requests(Send(self.next_id, "bench", None, PROMPT_TOKENS, streams, MAX_TOKENS))
                while not worker.is_finished:  # (Worker.wait raises while the worker is still pending)
                    await asyncio.sleep(0.02)
                self.next_id += streams

    draw_apart()  # as `phasetop` runs it: its drawing apart from its meters
    run_app(LoadedApp(Settings(_env_file=None, url=url), url))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=15.0, help="seconds of load measured (default 15)")
    parser.add_argument("--idle", type=float, default=20.0, help="seconds of idle measured (default 20)")
    parser.add_argument("--launches", type=int, default=5, help="launches for the first-paint median (default 5)")
    parser.add_argument("--time-scale", type=float, default=1.0, help="simulator --time-scale (default 1)")
    parser.add_argument("--profile", metavar="FILE", help="py-spy's collapsed stacks of the app over the load window")
    parser.add_argument("--child", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    from tui.sources.servers.simulator_server import SimulatorProcess

    sim_flags = ["--time-scale", str(args.time_scale)]
    before_load = round(os.getloadavg()[0], 2)
    with SimulatorProcess.start(sim_flags) as sim:
        paint = first_paint(sim.url, args.launches)
        figures = app_under_load(sim.url, args.idle, args.window, args.profile)
    figures["load_avg_1m_before"] = before_load
    idle, load = figures["idle"], figures["load"]
    print(f"simulator: H100 SXM + 8B, {' '.join(sim_flags)}; {STREAMS} streams, {PROMPT_TOKENS} in / "
          f"{MAX_TOKENS} out; terminal {SIZE[0]}x{SIZE[1]}; {os.cpu_count()} cores", file=sys.stderr)
    print(f"{'':<12} {'frames/s':>9} {'gap p50':>8} {'gap max':>8} {'CPU':>7} {'main thr':>9} {'meter':>7} {'tok/s':>7} "
          f"{'load 1m':>8} {'box busy':>9} {'others':>7}")
    for name, row in (("idle", idle), ("32 streams", load)):
        print(f"{name:<12} {row['frames_per_s']:>9.1f} {row['frame_gap_p50_ms'] or 0:>6.0f}ms {row['frame_gap_max_ms'] or 0:>6.0f}ms "
              f"{row['cpu_pct_of_core']:>6.1f}% {row['main_thread_cpu_pct']:>8.1f}% {row['meter_cpu_pct']:>6.1f}% "
              f"{row.get('generated_tok_s', 0):>7} "
              f"{row['load_avg_1m']:>8.2f} {row['machine_busy_cores']:>6.2f} c {row['others_busy_cores']:>5.2f} c")
    print(f"reference (same run): load 1m {before_load:.2f} before the simulator started; {os.cpu_count()} cores; during the "
          f"idle window the box had {idle['others_busy_cores']:.2f} cores busy besides the UI and its meter, during the load "
          f"{load['others_busy_cores']:.2f} (the simulator serving 32 streams, and whatever else runs here)")
    targets = (
        ("frames/s, 32 streams", "≥ 10 /s", f"{load['frames_per_s']:.1f} /s", load["frames_per_s"] >= 10),
        ("UI CPU, 32 streams", "≤ 40 % of a core", f"{load['cpu_pct_of_core']:.1f} % (main thread "
         f"{load['main_thread_cpu_pct']:.1f} %; its meter beside it {load['meter_cpu_pct']:.1f} %)", load["cpu_pct_of_core"] <= 40),
        ("UI CPU, idle", "≤ 2 % of a core", f"{idle['cpu_pct_of_core']:.1f} % (its meter {idle['meter_cpu_pct']:.1f} %)",
         idle["cpu_pct_of_core"] <= 2),
        ("first paint", "≤ 1 s", f"{paint['median_s']:.2f} s", paint["median_s"] <= 1),
    )
    print(f"{'target':<22} {'wanted':<17} {'measured':<58} {'met':<4} load 1m")
    for name, wanted, measured, met in targets:
        print(f"{name:<22} {wanted:<17} {measured:<58} {'yes' if met else 'NO':<4} "
              f"{(load if '32' in name else idle if 'idle' in name else paint)['load_avg_1m']:.2f}")
    print(f"first paint: median {paint['median_s'] * 1e3:.0f} ms (min {paint['min_s'] * 1e3:.0f}, max "
          f"{paint['max_s'] * 1e3:.0f}) over {paint['launches']} launches; load 1m {paint['load_avg_1m']:.2f}")
    print(json.dumps({"bench": "ui", "sim_flags": sim_flags, "streams": STREAMS, "max_tokens": MAX_TOKENS,
                      "first_paint": paint, **figures}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
