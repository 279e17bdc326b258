"""Many streams at once: batched token posts, one replot per burst, and more requests than are kept."""

from __future__ import annotations

from tests.app.test_app import completed, settings, wait_for
from tui.app.app import PhasetopApp
from tui.app.feeds import TokenBatches
from tui.app.messages import RequestCompleted, RequestStarted, ServerCameUp, TokensArrived
from tui.app.screens.main import KEEP_REQUESTS, MainScreen
from tui.core.records import RequestTiming

T0 = 1.7e9


def test_token_batches_post_every_request_at_once_and_one_on_its_own():
    posted = []
    batches = TokenBatches(posted.append)
    for request_id, offset in [(1, 0.1), (2, 0.2), (1, 0.15), (3, 0.3)]:
        batches.add(request_id, offset, f"<{request_id}>")
    batches.post(2)
    assert [(m.request_id, m.offsets_s, m.text) for m in posted] == [(2, (0.2,), "<2>")]
    batches.post()
    assert [(m.request_id, m.offsets_s, m.text) for m in posted[1:]] == [(1, (0.1, 0.15), "<1><1>"), (3, (0.3,), "<3>")]
    batches.post()
    assert len(posted) == 3  # nothing pending: nothing posted


async def test_more_requests_than_are_kept_finish_without_a_crash():
    """32 at once: the first 8 are dropped from state while they stream; their completion must not revive them."""
    app = PhasetopApp(settings(), "http://127.0.0.1:9", None, None, live=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        screen = app.screen
        ids = range(1, 33)
        for i in ids:
            screen.post_message(RequestStarted(i, f"r{i}", T0, 200))
        await pilot.pause()  # published: the first 8 are dropped
        for i in ids:
            screen.post_message(TokensArrived(i, (0.01, 0.02), "ab"))
        timings = {i: RequestTiming(ok=True, t_sent_unix=T0, token_offsets_s=(0.01, 0.02, 0.03 + i / 1000),
                                    prompt_tokens=200, output_tokens=3) for i in ids}
        for i in ids:
            screen.post_message(RequestCompleted(i, timings[i]))
        await pilot.pause()
        assert app.is_running
        assert screen.labels == [f"r{i}" for i in ids][-KEEP_REQUESTS:]
        assert screen.timings == [timings[i] for i in ids][-KEEP_REQUESTS:]


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
        batches = len({id(m) for m in seen if isinstance(m, TokensArrived)})
        assert all(m.timing.ok and m.timing.output_tokens == 128 for m in completed(seen))
        assert batches >= 8
        # Every stream's batch is posted in one burst that replots once; one publish per batch would be `batches`.
        assert len(publishes) <= batches / 2
        # One event per token, a few with empty text (held-back bytes, as vLLM sends): every stream's
        # text chunks end at its 128th token.
        assert [t.token_positions[-1] for t in screen.timings] == [127] * 8
