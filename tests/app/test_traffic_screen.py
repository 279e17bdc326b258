"""The traffic view (T) on the UI's own trace receiver: every request a server's spans tell of, a lane each of queue,
prefill and decode; phasetop's own send matched to its span; the slowest named with their phase; a refused export
counted, not lost in silence; the window saved as a run."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.app.harness import CEILING, send, settings, shows, started, wait_for
from tests.otlp import PROTOBUF_HEADERS, export_bytes, record
from tui.app.app import PhasetopApp
from tui.app.feeds.traces import endpoint_of
from tui.app.screens.traffic import TrafficScreen
from tui.app.widgets.traffic_lanes import TrafficLanes
from tui.core.view.traffic import DECODE, PREFILL
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sources.otlp_receiver import TraceReceiver


def painted(app, widget) -> str:
    strips = app.screen._compositor.render_strips()
    return "\n".join(strips[y].text for y in range(widget.region.y, widget.region.bottom))


async def test_served_requests_show_as_lanes_beside_phasetops_own_and_save_as_a_run(sim_url, tmp_path):
    seen = []
    sock = TraceReceiver.bind("127.0.0.1:0")
    endpoint = endpoint_of(sock)
    app = PhasetopApp(settings(tmp_path / "runs"), sim_url, None, CEILING, traces=sock)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        main = app.screen
        await started(pilot, seen)
        await send(pilot, seen, "1", 1)
        await wait_for(pilot, lambda: any(t.completion_id for t in main.timings), what="the answer's completion id")
        [mine] = [t for t in main.timings if t.completion_id]
        now = mine.t_sent_unix
        # The server's account: phasetop's send (its TTFT a few ms under the client's), one that queued, one long prompt.
        spans = [record(f"{mine.completion_id}-0", now, ttft_s=mine.ttft_s - 0.002, queue_s=0.0,
                        prefill_s=mine.ttft_s - 0.002),
                 record("cmpl-queued-0", now + 0.1, queue_s=1.8, prefill_s=0.02, ttft_s=1.82, e2e_s=2.7),
                 record("cmpl-long-0", now + 0.2, queue_s=0.0, prefill_s=0.9, ttft_s=0.9, prompt_tokens=6000, e2e_s=1.8)]
        async with httpx.AsyncClient() as client:
            answer = await client.post(endpoint, content=export_bytes(*spans, service="vllm", host="gpu-7"),
                                       headers=PROTOBUF_HEADERS)
            assert answer.status_code == 200
            refused = await client.post(endpoint, content=b"\x00not protobuf\xff" * 10, headers=PROTOBUF_HEADERS)
            assert refused.status_code == 400
        await wait_for(pilot, lambda: len(main.traffic.records) == 3, 10, "three served requests taken in")
        await pilot.press("T")
        await wait_for(pilot, lambda: shows(app, TrafficScreen), what="the traffic view")
        traffic = app.screen
        await wait_for(pilot, lambda: "1 exports refused" in str(traffic.query_one("#traffic-counts").render()), 10,
                       "the refused export counted")
        lanes = traffic.query_one(TrafficLanes)
        assert len(lanes.drawn.lanes) == 3
        drawn = painted(app, lanes)
        for mark in ("░", "━", "▄"):  # queue, prefill, decode
            assert mark in drawn, drawn
        assert "◆ cmpl-" in drawn  # phasetop's own send, marked on its lane
        own = str(traffic.query_one("#traffic-own").render())
        assert own.startswith("yours: 1 of 3 served") and "p50 2 ms" in own, own
        slowest = str(traffic.query_one("#traffic-slowest").render()).splitlines()
        assert slowest[1].strip().startswith("cmpl-queued-0: queue 1.80 s of TTFT 1.82 s: capacity")
        assert slowest[2].strip().startswith("cmpl-long-0: prefill 900 ms of TTFT 900 ms: 6,000-token prompt")
        assert f"receiving at {endpoint}" in str(traffic.query_one("#traffic-title").render())
        windows = str(traffic.query_one("#traffic-windows").render())
        assert windows.startswith("spans: 3 requests, ") and "/metrics: its last 30 s" in windows, windows
        assert "3 requests served over " in str(traffic.query_one("#traffic-title").render())
        await pilot.press("s")
        runs = tmp_path / "runs"
        await wait_for(pilot, lambda: any(json.loads(p.read_text())["kind"] == "traffic" for p in runs.glob("*.json")),
                       10, "the window saved")
        await wait_for(pilot, lambda: any(n.message.startswith("saved run ") for n in app._notifications), 10,
                       "'saved run …' said")
        await pilot.press("s")  # nothing came in or left since: the same window is not saved again
        await wait_for(pilot, lambda: any(n.message.startswith("already saved as run ") for n in app._notifications),
                       10, "'already saved' said")
        await pilot.pause(0.3)
    [run] = [r for r in (json.loads(p.read_text()) for p in runs.glob("*.json")) if r["kind"] == "traffic"]
    assert run["server"]["senders"] == ["vllm@gpu-7"] and len(run["requests"]) == 3
    assert [r["sent_by_phasetop"] for r in run["requests"]] == [True, False, False]


async def test_phasetops_own_simulator_exports_to_the_uis_receiver_and_every_send_is_matched(tmp_path):
    """The demo's path: the simulator started with the receiver's endpoint, 8 sends at once, each drawn from the
    simulator's own span (prefill then decode) and matched to phasetop's send."""
    sock = TraceReceiver.bind("127.0.0.1:0")
    simulator = SimulatorProcess.start(["--otlp-traces-endpoint", endpoint_of(sock)])
    seen = []
    try:
        app = PhasetopApp(settings(tmp_path / "runs"), simulator.url, None, CEILING, traces=sock)
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            main = app.screen
            await started(pilot, seen)
            await send(pilot, seen, "4", 8)
            await wait_for(pilot, lambda: len(main.traffic.records) == 8, 30, "the simulator's 8 spans")
            await wait_for(pilot, lambda: sum(1 for t in main.timings if t.completion_id) == 8, 10, "8 completion ids")
            await pilot.press("T")
            await wait_for(pilot, lambda: shows(app, TrafficScreen), what="the traffic view")
            traffic = app.screen
            lanes = traffic.query_one(TrafficLanes)
            await wait_for(pilot, lambda: lanes.drawn is not None and len(lanes.drawn.lanes) == 8, 10, "8 lanes")
            assert all(lane.record.sent_by_phasetop for lane in lanes.drawn.lanes)
            for lane in lanes.drawn.lanes:
                assert PREFILL in lane.cells and DECODE in lane.cells
                assert lane.record.unaccounted_s == pytest.approx(0, abs=1e-3)  # the simulator's phases are all of E2E
            assert str(traffic.query_one("#traffic-own").render()).startswith("yours: 8 of 8 served")
            assert "by phasetop-sim@" in str(traffic.query_one("#traffic-title").render())
    finally:
        simulator.stop()
