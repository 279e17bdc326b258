"""The roofline screen on a real simulator: one key away, its points placed by the sends and moving with them."""

from __future__ import annotations

import pytest

from tests.app.harness import completed, settings, shows, started, wait_for
from tui.app.app import PhasetopApp
from tui.app.screens.main import MainScreen
from tui.app.screens.roofline import RooflineScreen
from tui.core.hardware.roofline_live import NO_DECODE, NO_PREFILL
from tui.core.measure.sends import Send


DELIVERY_NO_POINT = "decode: the newest streams cannot place it: a decode stream timed the delivery, not the generation"


def streams(main: MainScreen, count: int) -> Send:
    """`count` streams at once, as key 4 sends them, with shorter answers (128 tokens, not 512): their prefills fit one
    step, so they decode together from the first token, and a quarter of the tokens is a quarter of the time."""
    return Send(main.state.live.send(count), f"{count} at once", None, 200, count, 128)


def batch_of(view) -> float | None:
    return view.decode.batch if view.decode is not None else None


async def test_w_opens_the_roofline_and_decode_moves_right_with_the_batch(slow_sim_url):
    """On the simulator 4× slower than the H100: 32 streams at full speed keep this 2-core box's client so busy that
    their chunks arrive in clumps, rightly flagged as delivery (the screen then says so and places no point)."""
    seen = []
    app = PhasetopApp(settings(), slow_sim_url)  # a simulator by URL: its own device and model, from its flags
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        main: MainScreen = app.screen
        await started(pilot, seen)
        await wait_for(pilot, lambda: main.state.server.simulator_flags is not None, what="the simulator identified")
        await pilot.press("w")
        await wait_for(pilot, lambda: shows(app, RooflineScreen), what="the roofline screen")
        roofline: RooflineScreen = app.screen
        assert roofline.view.roofs.peak_flops == 989e12 / 4 and roofline.view.prefill is None
        assert NO_DECODE in roofline.view.lines
        assert NO_PREFILL in roofline.view.lines and "2 sends" in NO_PREFILL
        await pilot.press("2")  # the key its reading names works here: the main screen's send, the roofline up
        await wait_for(pilot, lambda: roofline.view.decode is not None, what="the long request placed")
        prefill = roofline.view.prefill
        assert prefill.tokens >= 1990 and prefill.bound == "compute"  # 2,000, less any the tokenizer could not hit
        assert prefill.intensity_flop_per_byte > roofline.view.roofs.ridge_flop_per_byte
        one = roofline.view.decode
        assert one.batch == 1 and one.intensity_flop_per_byte < 1.1  # its answer decoded alone: about 1 FLOP a byte
        await pilot.press("escape", "c", "w")  # clearing the timeline clears its lanes, not what the roofline placed
        await wait_for(pilot, lambda: shows(app, RooflineScreen), what="the roofline again")
        roofline = app.screen
        assert main.timings == [] and (roofline.view.prefill, roofline.view.decode) == (prefill, one)
        main.send_requests(streams(main, 8))
        await wait_for(pilot, lambda: len(completed(seen)) == 9 and batch_of(roofline.view) == 8, timeout_s=30)
        eight = roofline.view.decode
        assert eight.bound == "bandwidth" and eight.intensity_flop_per_byte > 7 * one.intensity_flop_per_byte
        main.action_preset("many")  # 512 tokens: their prefills, 2,048 tokens a step, start them up to 4 steps apart
        await wait_for(pilot, lambda: len(completed(seen)) == 41 and batch_of(roofline.view) != 8, timeout_s=60)
        readings = str(roofline.query_one("#roofline-readings").render())
        if roofline.view.decode is None:  # a busy client read the 32 in clumps: said, and no point placed
            assert any(line.startswith(DELIVERY_NO_POINT) for line in roofline.view.lines), roofline.view.lines
            assert DELIVERY_NO_POINT in readings
        else:
            assert batch_of(roofline.view) == 32
            assert roofline.view.decode.intensity_flop_per_byte == pytest.approx(4 * eight.intensity_flop_per_byte, rel=0.1)
            assert "decode at batch 32: " in readings
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is main and main.roofline is None, what="back on the main screen")
