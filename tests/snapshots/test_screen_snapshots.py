"""SVG snapshots of the screens a key opens over the main one: before → after of two fixed runs, and the flag
editor on a server whose `--help` is a recorded vLLM 0.32's. Fixed size, fixed theme, no clock, no server.

Update with `python -m pytest tests/snapshots --snapshot-update` only after looking at the report.
"""

from __future__ import annotations

from datetime import UTC, datetime

from textual.app import App

from tests.app.harness import wait_for
from tui.app.screens.compare import CompareScreen
from tui.app.screens.flags import FlagEditorScreen
from tui.core.runs import compare_runs, new_run
from tui.core.serve_command import ServeCommand, Setting
from tui.core.tuning_loop import PROBE, SENDS

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
HELP = "tests/fixtures/help/vllm-0.32-help-all.txt"
"""Printed as the server's --help (the tests run from the repository's root)."""
FIRST = ServeCommand.parse(f"sh -c 'cat {HELP}' sh --port 8000 --max-num-batched-tokens 2048 --max-num-seqs 256")


def request(ttft_s: float, itl_s: float, n: int, sent: float) -> dict:
    offsets = [round(ttft_s + i * itl_s, 6) for i in range(n)]
    gaps = [round(b - a, 6) for a, b in zip(offsets, offsets[1:])]
    decode_s = offsets[-1] - ttft_s
    return {"ok": True, "ttft_s": ttft_s, "itl_s": gaps, "e2e_s": offsets[-1], "tpot_s": decode_s / (n - 1),
            "decode_tok_s": (n - 1) / decode_s, "prefill_tok_s": 200 / ttft_s, "token_offsets_s": offsets,
            "t_sent_unix": T0.timestamp() + sent, "prompt_tokens": 200, "output_tokens": n}


def session(batched_tokens: str, ttft_s: float, itl_s: float) -> dict:
    """Twelve requests of one workload on a server run with --max-num-batched-tokens `batched_tokens`."""
    server = {"url": "http://gpu-box:8000", "kind": "openai", "model": "meta-llama/Llama-3.1-8B-Instruct",
              "version": "0.32.0", "max_model_len": 131072, "process_start_time": 100.0,
              "engine_config": {"max_num_batched_tokens": batched_tokens, "enable_prefix_caching": "True"}}
    requests = [request(ttft_s * (1 + 0.02 * (i % 3)), itl_s * (1 + 0.01 * (i % 4)), 64, i * 2.0) for i in range(12)]
    run = new_run("probe", {"max_tokens": 64, "prompt_tokens": 200}, server, requests, {}, T0, T0)
    return {**run, "id": f"20260301-120000-probe-{batched_tokens}"}  # a run's id ends in random hex


class Over(App):
    """A host app with nothing but the screen under test."""

    def __init__(self, screen) -> None:
        super().__init__()
        self._screen = screen

    def on_mount(self) -> None:
        self.theme = "textual-dark"
        self.push_screen(self._screen)


def test_before_and_after_a_flag_change(snap_compare):
    """Each figure with its change, interval and verdict; the flag that changed above them."""
    comparison = compare_runs(session("2048", 0.210, 0.0120), session("512", 0.160, 0.0070))
    screen = CompareScreen(comparison, "Session 1 (before the restart) against session 2 (now)")
    assert snap_compare(Over(screen), terminal_size=(120, 40))


async def help_read(pilot) -> None:
    await wait_for(pilot, lambda: "flags differ from the server's defaults" in str(
        pilot.app.screen.query_one("#flags-defaults").render()), what="the server's defaults read")


def test_the_flag_editor_beside_the_servers_defaults(snap_compare):
    """A flag changed since the first start listed, each flag against vLLM's stated default, and what runs again."""
    now = FIRST.with_setting(Setting("max-num-batched-tokens", "512"))
    screen = FlagEditorScreen(now, FIRST, [(SENDS, "the last sends: 8 at once, long 2000"), (PROBE, "the probe")])
    assert snap_compare(Over(screen), terminal_size=(120, 30), run_before=help_read)
