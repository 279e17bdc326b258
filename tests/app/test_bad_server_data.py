"""The whole app against a server that sends bad data: a model id that is a number, a simulator /version whose
time scale is "0", NaN and infinite gauges, a malformed chunk. Each is shown as a line; no widget raises,
and a request that failed on a malformed chunk ends its lane (not `▶` forever)."""

from __future__ import annotations

import math

from textual.widgets import Sparkline

from testbeds.scripted_server import Reply, Script
from tests.app.harness import completed, rendered, settings, wait_for, wait_for_toast
from tests.hostile import serving
from tui.app.app import PhasetopApp
from tui.app.messages import (
    MetricsScraped,
    RequestCompleted,
    ServerCameUp,
    ServerWentDown,
)
from tui.app.widgets.timeline_pane import FAILED_MARK, TimelinePlot


def shown(screen, selector: str) -> str:
    return str(screen.query_one(selector).render())


async def test_a_model_id_that_is_a_number_is_shown_as_what_the_server_sent():
    script = Script()
    script.replies["/v1/models"] = Reply({"object": "list", "data": [{"id": 5, "object": "model"}]})
    seen = []
    with serving(script) as server:
        app = PhasetopApp(settings(), server.url)
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            await wait_for(pilot, lambda: any(isinstance(m, ServerWentDown) for m in seen))
            await pilot.pause(0.1)
            status = shown(app.screen, "#status")
            assert f"{server.url}/v1/models: the server sent 5 as data[0].id where a string was expected" in status
            assert not any(isinstance(m, ServerCameUp) for m in seen)
            await pilot.press("q")
    assert app.return_code in (0, None)


async def test_a_simulator_time_scale_of_zero_is_a_ceiling_line_not_a_crash():
    script = Script(model="Llama-3.1-8B")
    script.replies["/version"] = Reply({"version": "0.33.0", "phasetop_sim": {"gpu": "H100", "model": "Llama-3.1-8B",
                                                                              "bits": "16", "time_scale": "0"}})
    with serving(script) as server:
        app = PhasetopApp(settings(), server.url)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: screen.cpu_ceiling is not None)
            await pilot.pause(0.1)
            assert screen.cpu_ceiling == "ceiling: the simulator sent time_scale '0' where a number above 0 was expected"
            assert screen.decode_ceiling_tok_s is None
            assert "the simulator sent time_scale '0'" in shown(screen, "#gpu-text")
            await pilot.press("q")
    assert app.return_code in (0, None)


async def test_nan_and_infinite_gauges_leave_the_sparklines_drawable():
    script = Script()
    script.replies["/metrics"] = Reply("vllm:num_requests_running NaN\nvllm:num_requests_waiting +Inf\n"
                                       "vllm:kv_cache_usage_perc -Inf\n", content_type="text/plain; version=0.0.4")
    seen = []
    with serving(script) as server:
        app = PhasetopApp(settings(), server.url)
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            await wait_for(pilot, lambda: sum(isinstance(m, MetricsScraped) for m in seen) >= 2)
            await pilot.pause(0.2)
            pane = app.screen.query_one("#metrics-pane")
            assert shown(pane, "#value-running") == "nan" and shown(pane, "#value-waiting") == "inf"
            for spark in pane.query(Sparkline):
                assert all(math.isfinite(v) for v in spark.data), spark.id
                spark.render()  # a NaN here raised ValueError inside the Sparkline
            await pilot.press("q")
    assert app.return_code in (0, None)


async def test_a_malformed_chunk_ends_the_lane_and_says_why():
    script = Script()
    script.stream = [b'data: {"choices": "oops"}\n\n', b"data: [DONE]\n\n"]
    seen = []
    with serving(script) as server:
        app = PhasetopApp(settings(), server.url)
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            await wait_for(pilot, lambda: any(isinstance(m, ServerCameUp) for m in seen))
            await pilot.press("1")
            await wait_for(pilot, lambda: len(completed(seen)) == 1)
            await pilot.pause(0.5)
            [done] = completed(seen)
            assert not done.timing.ok
            assert "malformed chunk: choices is a string ('oops') where a list was expected" in done.timing.error
            plot = app.screen.query_one(TimelinePlot)
            assert [lane.ok for lane in plot.lanes] == [False]
            assert FAILED_MARK in rendered(plot) and "▶" not in rendered(plot)
            await wait_for_toast(pilot, "malformed chunk")
            await pilot.press("q")
    assert app.return_code in (0, None)
    assert not [m for m in seen if isinstance(m, RequestCompleted) and m.timing.ok]
