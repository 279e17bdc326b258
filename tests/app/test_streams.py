"""Many streams at once: batched token posts, one replot per burst, and more requests than are kept."""

from __future__ import annotations

from tests.app.harness import completed, settings, shows, wait_for
from tui.app.app import PhasetopApp
from tui.app.feeds.requests import TokenBatches
from tui.app.messages import (
    LaneTokens,
    RequestCompleted,
    RequestStarted,
    ServerCameUp,
    TokenBatch,
)
from tui.app.screens.main import MainScreen
from tui.app.widgets.prompt_pane import PRESETS
from tui.core.state.live import KEEP_REQUESTS
from tui.core.measure.records import RequestTiming

T0 = 1.7e9


def test_token_batches_post_every_request_at_once_and_one_on_its_own():
    posted = []
    batches = TokenBatches(posted.append)
    for request_id, offset in [(1, 0.1), (2, 0.2), (1, 0.15), (3, 0.3)]:
        batches.add(request_id, (offset,), f"<{request_id}>")
    batches.post(2)
    assert [(m.request_id, m.offsets_s, m.text) for b in posted for m in b.lanes] == [(2, (0.2,), "<2>")]
    batches.post()
    assert len(posted) == 2  # every pending lane in one message
    assert [(m.request_id, m.count, m.offsets_s, m.text) for m in posted[1].lanes] == [
        (1, 2, (0.1, 0.15), "<1><1>"), (3, 1, (0.3,), "<3>")]
    batches.post()
    assert len(posted) == 2  # nothing pending: nothing posted


def test_token_batches_sum_up_lanes_the_timeline_cannot_show():
    """Of 32 streams only the shown lanes carry every offset, and only the prompt pane's lane its text."""
    posted = []
    batches = TokenBatches(posted.append, detailed=range(27, 33), texted=32)
    for offset in (0.1, 0.2, 0.3):
        for request_id in range(1, 33):
            batches.add(request_id, (offset + request_id / 1000,), "x")
    batches.post()
    [batch] = posted
    lanes = {lane.request_id: lane for lane in batch.lanes}
    assert len(lanes) == 32 and all(lane.count == 3 for lane in lanes.values())
    assert lanes[1].offsets_s is None and (lanes[1].first_offset_s, lanes[1].last_offset_s) == (0.101, 0.301)
    assert lanes[27].offsets_s == (0.127, 0.227, 0.327) and lanes[27].text == ""
    assert lanes[32].text == "xxx"


async def _started(app: PhasetopApp, pilot, count: int) -> tuple[MainScreen, range]:
    """The main screen with requests 1…count started and published."""
    await wait_for(pilot, lambda: shows(app, MainScreen))
    screen = app.screen
    ids = range(1, count + 1)
    for i in ids:
        screen.post_message(RequestStarted(i, f"r{i}", T0, 200))
    await pilot.pause()
    return screen, ids


async def test_more_requests_than_are_kept_finish_without_a_crash():
    """More at once than are kept: the first 8 are dropped from state while they stream; their completion must not
    revive them."""
    app = PhasetopApp(settings(), "http://127.0.0.1:9", None, None, live=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen, ids = await _started(app, pilot, KEEP_REQUESTS + 8)  # published: the first 8 are dropped
        for i in ids:
            screen.post_message(TokenBatch((LaneTokens.detailed(i, (0.01, 0.02), "ab"),)))
        timings = {i: RequestTiming(ok=True, t_sent_unix=T0, token_offsets_s=(0.01, 0.02, 0.03 + i / 1000),
                                    prompt_tokens=200, output_tokens=3) for i in ids}
        for i in ids:
            screen.post_message(RequestCompleted(i, timings[i]))
        await pilot.pause()
        assert app.is_running
        assert [lane.label for lane in screen.lanes] == [f"r{i}" for i in ids][-KEEP_REQUESTS:]  # one batch: kept whole
        assert screen.timings == [timings[i] for i in ids][-KEEP_REQUESTS:]


async def test_a_batch_of_summed_up_lanes_keeps_the_shown_lanes_exact():
    """The screen walks lanes, not tokens: the shown ones get every offset, the others their TTFT until they end."""
    app = PhasetopApp(settings(), "http://127.0.0.1:9", None, None, live=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen, ids = await _started(app, pilot, 32)
        posted = []
        batches = TokenBatches(posted.append, detailed=range(27, 33), texted=32)
        for step in range(1, 11):
            for i in ids:
                batches.add(i, (0.01 * step + i / 1e4,), "t")
            if step % 3 == 0:
                batches.post()
        batches.post()
        for batch in posted:
            screen.post_message(batch)
        await pilot.pause()
        by_label = dict(zip([lane.label for lane in screen.lanes], screen.timings, strict=True))
        assert len(by_label["r32"].token_offsets_s) == 10 and by_label["r27"].token_offsets_s[-1] == 0.1 + 27 / 1e4
        assert by_label["r9"].token_offsets_s == (0.01 + 9 / 1e4,)  # not shown: its TTFT only
        assert screen.query_one("#answer").lines[-1].endswith("t" * 10)


async def test_eight_streams_replot_far_less_often_than_batches_arrive(sim_url):
    seen = []
    app = PhasetopApp(settings(), sim_url, None, None)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: any(isinstance(m, ServerCameUp) for m in seen))
        screen = app.screen
        publishes = []
        publish = screen._publish
        screen._publish = lambda: (publishes.append(1), publish())
        await pilot.press("4")  # 8 prompts at once
        await wait_for(pilot, lambda: len(completed(seen)) == 8, timeout_s=60)
        await pilot.pause(0.1)
        posted = list({id(m): m for m in seen if isinstance(m, TokenBatch)}.values())
        batches, lanes = len(posted), sum(len(m.lanes) for m in posted)
        tokens = next(p for p in PRESETS if p.key == "concurrent").max_tokens
        assert all(m.timing.ok and m.timing.output_tokens == tokens for m in completed(seen))
        assert batches >= 8
        # Every stream's chunks of a batch come in one message, which publishes once: one message per stream
        # would be `lanes` of them. (Each request's completion may publish once more.)
        assert lanes >= 3 * batches
        assert len(publishes) <= batches + 8 + 1
        # One event per token, a few with empty text (held-back bytes, as vLLM sends): every stream's
        # text chunks end at its last token (once the last batch is published: publishes wait out the frame budget).
        await wait_for(pilot, lambda: [t.token_ends[-1] for t in screen.timings] == [tokens - 1] * 8, timeout_s=5,
                       what=lambda: f"every stream's last token published: {[t.token_ends[-1] for t in screen.timings]}")


async def test_a_busy_meter_is_shown_and_the_figures_it_marked_are_kept_out():
    from tui.app.messages import ClientSampled
    from tui.core.measure.client_load import mark_busy
    from tui.core.measure.delivery import DELIVERY_NOT_GENERATION

    app = PhasetopApp(settings(), "http://127.0.0.1:9", None, None, live=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: shows(app, MainScreen))
        screen = app.screen
        busy = screen.query_one("#client-busy")
        assert not busy.display
        screen.post_message(ClientSampled(96.0))  # the meters' CPU, as the GPU/host poll reads it
        screen.post_message(RequestStarted(1, "short 200", T0, 200))
        timing = RequestTiming(ok=True, t_sent_unix=T0, token_offsets_s=tuple(0.01 + 0.005 * k for k in range(20)),
                               prompt_tokens=200, output_tokens=20)
        # The meter marks what it timed while near a core (tui.sources.loop_watch).
        screen.post_message(RequestCompleted(1, mark_busy([timing], [(T0, T0 + 1, 96.0)])[0]))
        await pilot.pause()
        assert busy.display and str(busy.content) == "client busy: 96 % CPU, figures marked"
        assert screen.timings[-1].burst.startswith("the client was busy (96 % of a core)")
        assert DELIVERY_NOT_GENERATION in str(screen.query_one("#timeline-figures").content)
        assert screen.diagnosis == ""  # its figures are kept out of the findings
        screen.post_message(ClientSampled(30.0))
        await pilot.pause()
        assert not busy.display
