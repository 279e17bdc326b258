"""The metrics pane's quantiles span a rolling window, so one request's TTFT stays on screen."""

import time

import pytest

from tests.app.harness import completed, settings, text_of, wait_for
from tui.app.app import PhasetopApp
from tui.app.messages import MetricsScraped, RequestCompleted, ServerCameUp
from tui.app.widgets.metrics_pane import MetricsPane, window_text

HOLD_S = 10.5
"""How long after its request a quantile must still show: longer than ten scrapes at the default 1 s."""


async def test_one_requests_ttft_quantile_is_still_shown_ten_seconds_later(sim_url):
    seen = []
    app = PhasetopApp(settings(), sim_url, None, None)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: any(isinstance(m, ServerCameUp) for m in seen))
        await pilot.press("1")
        await wait_for(pilot, lambda: any(isinstance(m, RequestCompleted) for m in seen))
        done_at = time.monotonic()
        [done] = completed(seen)
        assert done.timing.ok
        await wait_for(pilot, lambda: "n=1)" in text_of(app, "#value-ttft"))
        scrapes_before = sum(isinstance(m, MetricsScraped) for m in seen)
        while time.monotonic() - done_at < HOLD_S:
            await pilot.pause(0.25)
            line = text_of(app, "#value-ttft")
            # Checked all along, not only at the end: the line never blinks back to "no requests".
            assert "n=1)" in line and "no requests" not in line, line
        scrapes = {id(m): m for m in seen if isinstance(m, MetricsScraped)}
        assert len(scrapes) - scrapes_before >= 5, "the pane was rescraped while it held the quantile"
        line = text_of(app, "#value-ttft")
        assert any(ch.isdigit() for ch in line.split("ms")[0]), line  # a figure, not a dash
        latest = max(scrapes.values(), key=lambda m: m.snapshot.t_unix).snapshot
        assert latest.histograms["ttft_s"].n == 1
        assert latest.window_s is not None and latest.window_s >= HOLD_S - 1
        subtitle = str(app.screen.query_one(MetricsPane).border_subtitle)
        assert subtitle.startswith("p50/p99 · tok/s over ") and subtitle.endswith(" s"), subtitle
        await pilot.press("q")


async def test_the_window_setting_reaches_the_scraper(sim_url):
    """A 2 s window: the same request's quantile is gone once the window has passed it."""
    seen = []
    app = PhasetopApp(settings(poll={"metrics_window_s": 2.0}), sim_url, None, None)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: any(isinstance(m, ServerCameUp) for m in seen))
        await pilot.press("1")
        await wait_for(pilot, lambda: any(isinstance(m, RequestCompleted) for m in seen))
        await wait_for(pilot, lambda: "n=1)" in text_of(app, "#value-ttft"))
        await wait_for(pilot, lambda: "none in window" in text_of(app, "#value-ttft"), timeout_s=8.0)
        assert "over 2 s" in str(app.screen.query_one(MetricsPane).border_subtitle)
        await pilot.press("q")


@pytest.mark.parametrize(("window_s", "text"), [
    (None, "p50/p99 · tok/s since start"),
    (0.47, "p50/p99 · tok/s over 0.4 s"),
    (1.99, "p50/p99 · tok/s over 1.9 s"),
    (4.2, "p50/p99 · tok/s over 4 s"),
    (30.9, "p50/p99 · tok/s over 30 s"),
    (120.0, "p50/p99 · tok/s over 120 s"),
])
def test_the_window_is_named_rounded_down(window_s, text):
    assert window_text(window_s) == text
