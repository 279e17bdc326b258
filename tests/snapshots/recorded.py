"""A recorded, finite feed for the main screen: the messages its workers would post, with fixed figures.

The app runs with `live=False` (no workers), and `play` posts these messages to the screen one at a
time, so every shot shows the same screen: no wall clock, no random ids, no timer running.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from textual.pilot import Pilot
from textual.widgets import TextArea

from tui.app.app import PhasetopApp
from tui.app.messages import (
    GpuSampled,
    HostSampled,
    LaneTokens,
    MetricsScraped,
    RequestCompleted,
    RequestStarted,
    ServerCameUp,
    ServerWentDown,
    TokenBatch,
)
from tui.app.screens.main import MainScreen
from tui.app.widgets.prompt_pane import PromptPane
from tui.config import Settings
from tui.core.measure.records import RequestTiming
from tui.core.telemetry.readings import GpuReading, GpuSample, HistogramQuantiles, HostSample, MetricsSnapshot, ProcessSample

URL = "http://gpu-box:8000"
"""Never contacted: the app runs without workers."""
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
CEILING = (3350e9 / 16e9, 131072.0, 16e9)
"""H100 SXM and the 8B layout at 16 bit: 209 tok/s single-stream decode ceiling."""
THEME = "textual-dark"
T0 = datetime(2025, 1, 1, 12, 0, 0).timestamp()
"""Local noon: "down since" always reads 12:00:05, whatever the machine's time zone."""
GIB = 1024**3
CONFIG = {"enable_prefix_caching": "True", "block_size": "16", "num_gpu_blocks": "27000", "max_model_len": "131072"}


def offsets(ttft_s: float, itl_s: float, count: int) -> tuple[float, ...]:
    """Chunk arrivals: the first at TTFT, then one every ITL (rounded so the figures are stable)."""
    return tuple(round(ttft_s + i * itl_s, 6) for i in range(count))


SHORT = RequestTiming(ok=True, t_sent_unix=T0, token_offsets_s=offsets(0.021, 0.0049, 128), connect_s=0.0004,
                      prompt_tokens=200, output_tokens=128)
LONG_SENT = T0 + 0.9
LONG_SO_FAR = offsets(0.214, 0.0051, 48)
"""The long request is mid-stream: 48 of its tokens have arrived."""


def quantiles(p50: float, p99: float, n: float) -> HistogramQuantiles:
    return HistogramQuantiles(p50=p50, p90=(p50 + p99) / 2, p99=p99, mean=p50, n=n, n_total=n,
                              first_le=0.001, last_le=80.0)


def metrics(t_unix: float, running: float, kv: float, decode_tok_s: float) -> MetricsSnapshot:
    return MetricsSnapshot(
        t_unix=t_unix, engine="vllm", window_s=1.0, running=running, waiting=0.0, kv_cache_usage=kv,
        preemptions_total=0.0, prompt_tokens_total=2200.0, generation_tokens_total=176.0,
        prompt_tok_s=200.0, generation_tok_s=decode_tok_s, prefix_cache_hit_rate=0.0,
        histograms={"ttft_s": quantiles(0.021, 0.214, 2), "itl_s": quantiles(0.0049, 0.0062, 174)},
        engine_config=dict(CONFIG),
    )


GPU = GpuSample(t_unix=T0, devices=(GpuReading(
    index="0", name="NVIDIA H100 80GB HBM3", mem_bw_util=0.61, mem_bw_gbs=2040.0, mem_bw_source="gpm",
    peak_bw_gbs=3350.0, sm_util=0.34, mem_used_bytes=71 * GIB, mem_total_bytes=80 * GIB, server_mem_bytes=70 * GIB,
),))
HOST = HostSample(cpu_percent=12.0, cpu_count=32, ram_used_bytes=41 * GIB, ram_total_bytes=256 * GIB,
                  ram_available_bytes=215 * GIB,
                  process=ProcessSample(pid=4242, name="vllm", cpu_percent=98.0, rss_bytes=6 * GIB, num_threads=40))


NO_REQUESTS = HistogramQuantiles(p50=None, p90=None, p99=None, mean=None, n=0, n_total=0, first_le=0.001, last_le=80.0)


def earlier() -> list:
    """The two minutes before the recording, a scrape and a GPU sample every 2 s, for the charts: idle (no
    requests in the window), then a burst of streams that fills the KV pool and queues, then idle again."""
    facts = []
    for i in range(55):
        t = T0 - 110 + 2 * i
        load = max(0.0, 1 - abs(i - 25) / 15)
        snapshot = replace(metrics(t, round(8 * load), 0.6 * load, 1500 * load), waiting=float(max(0, round(6 * load) - 3)))
        if load:
            snapshot = replace(snapshot, histograms={"ttft_s": quantiles(0.02 + 0.4 * load, 0.05 + 0.9 * load, 8),
                                                     "itl_s": quantiles(0.005 + 0.007 * load, 0.007 + 0.01 * load, 900)})
        else:
            snapshot = replace(snapshot, histograms={"ttft_s": NO_REQUESTS, "itl_s": NO_REQUESTS})
        gbs = 300 + 2400 * load
        device = replace(GPU.devices[0], mem_bw_gbs=gbs, mem_bw_util=gbs / 3350)
        facts += [MetricsScraped(snapshot), GpuSampled(GpuSample(t_unix=t, devices=(device,)))]
    return facts


def make_app() -> PhasetopApp:
    """The app on a server that is never called: the feed is posted by `play`."""
    return PhasetopApp(Settings(_env_file=None), URL, None, CEILING, live=False)


async def play(pilot: Pilot, *, down: bool = False, history: bool = False) -> None:
    """Post the recording: server up, metrics, GPU/host, a finished short request and a long one mid-stream.

    With `down`, the server then stops answering at T0 + 5 s; with `history`, the two minutes `earlier` come first.
    """
    app = pilot.app
    app.theme = THEME
    while not (isinstance(app.screen, MainScreen) and app.screen.query(TextArea)):  # its panes composed
        await pilot.pause()
    screen = app.screen
    screen.query_one(TextArea).cursor_blink = False
    facts = [
        ServerCameUp("openai", MODEL, 131072, "0.10.1"),
        *(earlier() if history else []),
        GpuSampled(GPU),
        HostSampled(HOST),
        *[MetricsScraped(metrics(T0 + i, running, kv, rate))
          for i, (running, kv, rate) in enumerate([(0, 0.0, 0.0), (1, 0.01, 190.0), (1, 0.02, 201.0), (2, 0.04, 188.0)])],
        RequestStarted(1, "short 200", SHORT.t_sent_unix, 200),
        TokenBatch((LaneTokens.detailed(1, SHORT.token_offsets_s[:60], "The two phases of inference "),)),
        TokenBatch((LaneTokens.detailed(1, SHORT.token_offsets_s[60:], "are prefill and decode."),)),
        RequestCompleted(1, SHORT),
        RequestStarted(2, "long 2000", LONG_SENT, 2000),
        TokenBatch((LaneTokens.detailed(2, LONG_SO_FAR, "Prefill reads the whole prompt in one pass; decode writes one token a step"),)),
    ]
    for fact in facts:
        if isinstance(fact, RequestStarted):
            screen.query_one(PromptPane).start_answer(f"── {fact.label} ──")
        screen.post_message(fact)
        await pilot.pause()
    if down:
        screen.post_message(ServerWentDown(T0 + 5, f"{URL}: connection refused"))
        await pilot.pause()
