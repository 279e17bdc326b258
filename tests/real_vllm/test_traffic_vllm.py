"""The traffic view on real vLLM: vLLM exporting its spans to the UI's own receiver (`--otlp`), a send from the UI and
a plain client's request both drawn with their phases, phasetop's matched to its span."""

from __future__ import annotations

import httpx
import pytest

from tests.app.harness import completed, settings, shows, wait_for
from tests.real_vllm.conftest import CLIENT_TIMEOUT_S, MEASURING_FLAGS, OTEL_ENV, start_vllm
from tui.app.app import PhasetopApp
from tui.app.feeds.traces import endpoint_of
from tui.app.screens.traffic import TrafficScreen
from tui.app.widgets.traffic_lanes import TrafficLanes
from tui.core.view.traffic import DECODE, PREFILL
from tui.sources.otlp_receiver import TraceReceiver
from tui.sources.servers.vllm_server import SERVED_MODEL_NAME

pytestmark = pytest.mark.real_vllm


async def test_the_traffic_view_draws_vllms_served_requests_phasetops_and_a_plain_clients(tmp_path):
    sock = TraceReceiver.bind("127.0.0.1:0")
    with start_vllm((*MEASURING_FLAGS, "--otlp-traces-endpoint", endpoint_of(sock)), env=OTEL_ENV) as server:
        seen = []
        app = PhasetopApp(settings(tmp_path / "runs", timeout_s=float(CLIENT_TIMEOUT_S)), server.url, None, None,
                          traces=sock)
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            main = app.screen
            await wait_for(pilot, lambda: main.server.model is not None, 120, "vLLM described")
            await pilot.press("1")
            await wait_for(pilot, lambda: len(completed(seen)) == 1, 120, "the UI's send answered")
            async with httpx.AsyncClient(timeout=float(CLIENT_TIMEOUT_S)) as client:
                plain = await client.post(server.url + "/v1/completions", json={
                    "model": SERVED_MODEL_NAME, "prompt": "A plain client's question", "max_tokens": 12, "ignore_eos": True})
            assert plain.status_code == 200, plain.text
            await wait_for(pilot, lambda: len(main.traffic.records) == 2, 30, "both spans received")
            await wait_for(pilot, lambda: any(t.completion_id for t in main.timings), 10, "the send's completion id")
            await pilot.press("T")
            await wait_for(pilot, lambda: shows(app, TrafficScreen), what="the traffic view")
            traffic = app.screen
            lanes = traffic.query_one(TrafficLanes)
            await wait_for(pilot, lambda: lanes.drawn is not None and len(lanes.drawn.lanes) == 2, 10, "two lanes")
            by_id = {lane.record.request_id: lane for lane in lanes.drawn.lanes}
            plain_lane = by_id.get(plain.json()["id"]) or by_id[f"{plain.json()['id']}-0"]
            assert not plain_lane.record.sent_by_phasetop and plain_lane.record.completion_tokens == 12
            [own] = [lane for lane in lanes.drawn.lanes if lane.record.sent_by_phasetop]
            for lane in (own, plain_lane):
                assert PREFILL in lane.cells and DECODE in lane.cells, lane.cells
            said = str(traffic.query_one("#traffic-own").render())
            assert said.startswith("yours: 1 of 2 served"), said
