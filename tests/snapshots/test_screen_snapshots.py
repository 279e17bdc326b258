"""SVG snapshots of the screens beside the main one: before → after of two fixed runs, the flag editor on a server
whose `--help` is a recorded vLLM 0.32's, an experiment that ended, and the fleet. Fixed size, fixed theme, no clock,
no server.

Update with `python -m pytest tests/snapshots --snapshot-update` only after looking at the report.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from tests.app.harness import ScreenHost, settings, wait_for
from tui.app.fleet_messages import FleetRead
from tui.app.lab_messages import ExperimentFinished, RunSaved
from tui.app.screens.compare import CompareScreen
from tui.app.screens.experiment import ExperimentScreen
from tui.app.screens.flags import DEFAULTS_READING, FlagEditorScreen
from tui.app.screens.fleet import FleetScreen
from tui.core.experiments.plans import make_plan
from tui.core.fleet.instances import Fleet, FleetRow, Latency, Pool
from tui.core.runs.run_record import compare_runs, new_run
from tui.core.serving.serve_command import ServeCommand, Setting
from tui.core.state.tuning_loop import PROBE, SENDS
from tui.sources.detect import ServerInfo
from tui.sources.workloads.experiments import ExperimentResult
from tui.sources.meter import LocalMeter

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


def test_before_and_after_a_flag_change(snap_compare):
    """Each figure with its change, interval and verdict; the flag that changed above them."""
    comparison = compare_runs(session("2048", 0.210, 0.0120), session("512", 0.160, 0.0070))
    screen = CompareScreen(comparison, "Session 1 (before the restart) against session 2 (now)")
    assert snap_compare(ScreenHost(screen), terminal_size=(120, 40))


async def help_read(pilot) -> None:
    await wait_for(pilot, lambda: str(pilot.app.screen.query_one("#flags-defaults").render()) != DEFAULTS_READING,
                   what="the server's defaults read")


def test_the_flag_editor_beside_the_servers_defaults(snap_compare):
    """A flag changed since the first start listed, each flag against vLLM's stated default, and what runs again."""
    now = FIRST.with_setting(Setting("max-num-batched-tokens", "512"))
    screen = FlagEditorScreen(now, FIRST, [(SENDS, "the last sends: 8 at once, long 2000"), (PROBE, "the probe")])
    assert snap_compare(ScreenHost(screen), terminal_size=(120, 30), run_before=help_read)


def prompt_length_rows() -> list[dict]:
    """The prompt-length experiment on an H100-like server: TTFT climbs with the prompt, decode stays."""
    return [{"prompt_tokens": n, "ttft_s": 0.012 + n * 3.3e-5, "decode_tok_s": 204.0 - n / 2000, "prefill_tok_s": n / (0.012 + n * 3.3e-5),
             "itl_p50_s": 0.0049} for n in (200, 2000, 8000)]


def test_an_experiment_done_with_its_chart_table_and_finding(snap_compare):
    """The prompt-length experiment ended: the chart of both axes, the table, the finding and the saved run's id."""
    plan = make_plan("prompt-tokens", [200, 2000, 8000])
    info = ServerInfo("openai", "http://gpu-box:8000", "meta-llama/Llama-3.1-8B-Instruct", 131072, "0.32.0")
    screen = ExperimentScreen(plan, settings(), info.url, info, save_runs=True, meter_for=LocalMeter, live=False)
    result = ExperimentResult(plan, tuple(prompt_length_rows()), "TTFT ×8.0 from 200 to 8,000 tokens (prefill); "
                              "decode stays within 2 % (204 → 200 tok/s)", ())

    async def finished(pilot) -> None:
        screen.post_message(ExperimentFinished(result, None))
        screen.post_message(RunSaved("prompt-tokens sweep", "20260301-120000-sweep-1a2b"))
        await wait_for(pilot, lambda: "saved run" in str(screen.query_one("#experiment-message").render()),
                       what="the run saved")

    assert snap_compare(ScreenHost(screen), terminal_size=(120, 40), run_before=finished)


def fleet_row(n: int, role: str, running: float, waiting: float, kv: float, itl_p99_s: float) -> FleetRow:
    host = f"10.0.0.{n}"
    return FleetRow(
        key=f"vllm/{host}:8000", job="vllm", instance=f"{host}:8000", host=host, url=f"http://{host}:8000",
        engine="vllm", model="meta-llama/Llama-3.1-8B-Instruct", role=role, labels={"role": role}, status="up",
        restarts=0, started_unix=T0.timestamp() - 3600, last_error=None, running=running, waiting=waiting,
        waiting_by_reason={}, kv_cache_usage=kv, prompt_tok_s=9000.0 if role == "prefill" else 300.0,
        generation_tok_s=40.0 if role == "prefill" else 1900.0, generation_tokens_total=1e6,
        prefix_cache_hit_rate=0.3, preemptions_per_s=0.0, kv_transfer_tok_s=None,
        ttft=Latency(0.09, 0.31), itl=Latency(0.011, itl_p99_s), gpus=(), gpu_shared_by=1, dram_gbs=None, peak_gbs=None,
        ceiling=None, decode_pct_of_ceiling=None, source_names={})


def test_the_fleet_with_a_saturated_decode_pool(snap_compare, monkeypatch):
    """Three instances read through Prometheus: the saturated one and the slowest called out, the pools and the KV
    moved from prefill to decode below."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    rows = (fleet_row(1, "prefill", 2, 0, 0.21, 0.018), fleet_row(2, "decode", 8, 5, 0.97, 0.061),
            fleet_row(3, "decode", 6, 0, 0.55, 0.022))
    pools = (Pool("prefill", (rows[0].key,), 2, 0, 0.21, 9000.0, 40.0, Latency(0.09, 0.31), Latency(0.011, 0.018)),
             Pool("decode", (rows[1].key, rows[2].key), 14, 5, 0.76, 600.0, 3800.0, Latency(0.1, 0.35), Latency(0.012, 0.055)))
    fleet = Fleet(T0.timestamp(), rows, (), pools, 8200.0, {"ttft": Latency(0.1, 0.33), "itl": Latency(0.012, 0.05)}, 0.21)
    screen = FleetScreen(settings(prometheus={"role_label": "role"}), "http://prometheus:9090", live=False)

    async def read(pilot) -> None:
        screen.post_message(FleetRead(fleet, screen.reading, 0.0))
        await wait_for(pilot, lambda: screen.fleet is not None, what="the fleet shown")

    try:
        assert snap_compare(ScreenHost(screen), terminal_size=(160, 30), run_before=read)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
