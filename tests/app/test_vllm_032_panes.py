"""vLLM 0.32's extra figures in the panes: waiting for capacity vs deferred in the saturation call-out, the KV
pool in tokens, and vLLM's estimated read GB/s beside NVML's measured GB/s."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from textual.app import App, ComposeResult
from textual.widgets import Static

import tui.app
from tests.fixtures.metrics_server import fixture, set_value
from tests.snapshots.recorded import make_app, play
from tui.app.messages import MetricsScraped
from tui.app.widgets.gpu_pane import GpuPane
from tui.app.widgets.metrics_pane import MetricsPane
from tui.core.telemetry.metric_names import read_scrape
from tui.core.telemetry.promstats import build_snapshot
from tui.core.telemetry.readings import GpuReading, GpuSample

TCSS = Path(tui.app.__file__).parent / "phasetop.tcss"
E = 'engine="0",model_name="tiny"'


def snapshot_of(text: str, estimated_read_gbs: float | None = None):
    """The 0.32 fixture as the scraper would make it; the window's figures set where a test needs them."""
    snap = build_snapshot(None, read_scrape(text, 0.0, 1.7646e9))
    return replace(snap, est_read_gbs=estimated_read_gbs)


class _Host(App):
    CSS_PATH = TCSS

    def compose(self) -> ComposeResult:
        yield MetricsPane(id="metrics-pane", classes="pane")
        yield GpuPane(id="gpu-pane", classes="pane")


def text(app: App, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


async def test_saturation_call_out_splits_waiting_for_capacity_from_deferred():
    app = _Host()
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(MetricsPane)
        pane.snapshot = snapshot_of(fixture("vllm-0.32.txt"))
        await pilot.pause()
        assert pane.has_class("-saturated")
        assert text(app, "#metrics-saturation") == (
            "SATURATED: 4 waiting for capacity while the KV pool is 97% full; 1 more deferred (not for room)")
        assert text(app, "#value-waiting") == "5 (1 deferred)"
        assert text(app, "#value-kv") == "97% · 31.8k of 32.8k tok"  # 0.97 × 32,768 tokens

        only_deferred = set_value(set_value(fixture("vllm-0.32.txt"), f'vllm:num_requests_waiting_by_reason{{{E},reason="capacity"}}', 0),
                                  f'vllm:num_requests_waiting_by_reason{{{E},reason="deferred"}}', 5)
        pane.snapshot = snapshot_of(only_deferred)
        await pilot.pause()
        assert not pane.has_class("-saturated"), "deferred requests do not wait for the pool"
        assert text(app, "#metrics-saturation") == ""
        assert text(app, "#value-waiting") == "5 (5 deferred)"


async def test_gpu_pane_shows_the_vllm_estimate_beside_the_measured_bandwidth():
    app = _Host()
    device = GpuReading(index="0", name="NVIDIA H100", mem_bw_util=0.25, mem_bw_gbs=837.5, mem_bw_source="gpm",
                        peak_bw_gbs=3350.0)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(GpuPane)
        pane.gpu = GpuSample(t_unix=0.0, devices=(device,))
        pane.metrics = snapshot_of(fixture("vllm-0.32.txt"), estimated_read_gbs=801.4)
        await pilot.pause()
        lines = pane.text.splitlines()
        measured = next(i for i, line in enumerate(lines) if "memory bandwidth 838 of 3,350 GB/s" in line)
        assert "vLLM estimate: 801 GB/s read per GPU" in lines[measured + 1], lines
        pane.metrics = snapshot_of(fixture("vllm-0.32.txt"), estimated_read_gbs=None)  # --enable-mfu-metrics off
        await pilot.pause()
        assert "vLLM estimate" not in pane.text
        assert "memory bandwidth 838 of 3,350 GB/s" in pane.text


async def test_main_screen_feeds_the_scraped_estimate_to_the_gpu_pane():
    """The screen binds its metrics to the GPU/host pane: a MetricsScraped with vLLM's estimate shows there."""
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await play(pilot)
        pane = app.screen.query_one(GpuPane)
        assert "vLLM estimate" not in pane.text
        app.screen.post_message(MetricsScraped(snapshot_of(fixture("vllm-0.32.txt"), estimated_read_gbs=12.25)))
        await pilot.pause()
        assert "vLLM estimate: 12.2 GB/s read per GPU" in pane.text
        assert "SATURATED: 4 waiting for capacity" in text(app, "#metrics-saturation")
