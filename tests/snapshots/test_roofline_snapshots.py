"""SVG snapshots of the roofline screen on fixed figures: a 2,000-token prefill, a send of 8 decoding together (and
the same at 8 bit, projected) and the server's own estimate, on a simulated H100 SXM; then with the last concurrency
and prompt-length sweeps traced, their rows as the simulator's physics times them. Fixed size, fixed theme, no
clock, no server.

Update with `python -m pytest tests/snapshots --snapshot-update` only after looking at the report.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App

import tui.app.app
from tui.app.screens.roofline import RooflineScreen
from tui.core.hardware.devices import find_device
from tui.core.hardware.models import MODELS
from tui.core.measure.records import RequestTiming
from tui.core.hardware.roofline_live import live_roofline, live_target
from tui.core.telemetry.readings import MetricsSnapshot
from tui.sim.options import SimOptions
from tui.sim.step_cost import EngineConfig, step_time_s

SIM = EngineConfig(find_device("H100"), MODELS["8b"])
FLAGS = SimOptions(SIM, "meta-llama/Llama-3.1-8B-Instruct").sim_info()
SWEPT = {
    "concurrency": [{"streams": n, "batch_decode_tok_s": n / step_time_s(SIM, [(1, 328)] * n), "context_tokens": 328.0}
                    for n in (1, 2, 4, 8, 16, 32)],  # the default sweep: 200-token prompts, 256 tokens each
    "prompt-tokens": [{"prompt_tokens": n, "ttft_s": step_time_s(SIM, [(n, 0)]) + 0.001,
                       "prefill_tok_s": n / (step_time_s(SIM, [(n, 0)]) + 0.001)} for n in (200, 500, 1000, 2000)],
}


def request(sent: float, ttft_s: float, tokens: int, prompt: int) -> RequestTiming:
    return RequestTiming(ok=True, t_sent_unix=sent, token_offsets_s=tuple(ttft_s + i * 0.0049 for i in range(tokens)),
                         prompt_tokens=prompt, output_tokens=tokens)


def view(swept=None):
    """As the simulator times them: the prefill at half the compute roof, the 8 streams just under the bandwidth
    roof, the server's window mixing both."""
    timings = [request(100.0, 0.0676, 2, 2000), *(request(110.0 + 0.001 * i, 0.021, 128, 200) for i in range(8))]
    window = MetricsSnapshot(t_unix=120.0, engine="vllm", window_s=30.0, est_flops_per_s=2.1e12, est_read_gbs=200.0)
    return live_roofline(live_target(FLAGS, None, None, False), timings, window, swept=swept)


class Over(App):
    """A host app with nothing but the roofline screen, in the app's own styles."""

    CSS_PATH = str(Path(tui.app.app.__file__).with_name("phasetop.tcss"))

    def __init__(self, swept=None) -> None:
        super().__init__()
        self.swept = swept

    def on_mount(self) -> None:
        self.theme = "textual-dark"
        self.push_screen(RooflineScreen(view(self.swept), lambda preset: None))


@pytest.mark.parametrize("size", [(120, 40), (160, 45)])
def test_the_roofline_with_both_phases_and_the_servers_estimate(snap_compare, size):
    assert snap_compare(Over(), terminal_size=size)


@pytest.mark.parametrize("size", [(120, 40), (160, 45)])
def test_the_roofline_with_the_last_sweeps_traced(snap_compare, size):
    assert snap_compare(Over(SWEPT), terminal_size=size)
