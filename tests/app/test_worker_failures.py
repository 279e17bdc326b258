"""A worker that raises (a bug: every feed answers with messages) is one line on screen naming what stopped, on each
screen that runs workers, never a silent stop and never the app closing; a request whose timing broke ends failed
with the reason, not in flight for good."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App

import tui.app
from tests.app.harness import settings, wait_for
from tui.app.feeds.requests import TokenBatches, stream_lane
from tui.app.messages import RequestCompleted, RequestOnWire, RequestStarted
from tui.app.screens.fleet import FleetScreen
from tui.app.screens.runs import RunsScreen
from tui.sources.stream import RequestSent, StreamRequest

TCSS = Path(tui.app.__file__).parent / "phasetop.tcss"


class _Host(App):
    CSS_PATH = TCSS

    def __init__(self, screen) -> None:
        super().__init__()
        self._first = screen

    def on_mount(self) -> None:
        self.push_screen(self._first)


def broken_reader() -> None:
    raise KeyError("ttft_s\x1b[31m")


@pytest.mark.parametrize("make_screen", [lambda tmp: RunsScreen(tmp / "runs"),
                                         lambda tmp: FleetScreen(settings(), "http://127.0.0.1:9", live=False)],
                         ids=["runs", "fleet"])
async def test_a_worker_that_raises_is_said_on_screen_and_the_app_stays(tmp_path, make_screen):
    screen = make_screen(tmp_path)
    app = _Host(screen)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen is screen, what="the screen shown")
        screen.run_worker(broken_reader, name="the run reader", thread=True, exit_on_error=False)
        await wait_for(pilot, lambda: app._notifications, 10, "a toast")
        [toast] = list(app._notifications)
        assert toast.message.startswith("the run reader stopped: KeyError:") and toast.severity == "error"
        assert "\x1b" not in toast.message  # the error's text is shown as text, escapes made visible
        assert app.is_running and app.screen is screen


class _MeterThatBreaks:
    """A meter with a fault of its own after the request went on the wire (a bug, not the server's)."""

    async def stream(self, request, connect_s=None, text=False):
        yield RequestSent(T_WIRE)
        raise RuntimeError("a bug in the meter")


T_WIRE = 1_700_000_000.5


async def test_a_lane_whose_timing_broke_ends_failed_with_the_reason_not_in_flight_for_good():
    posted = []
    request = StreamRequest(api="openai", model="m", prompt="hi", max_tokens=4, prompt_tokens=2)
    with pytest.raises(RuntimeError):  # raised on, for the worker's toast
        await stream_lane(_MeterThatBreaks(), TokenBatches(posted.append), posted.append, 7, "short 200", request)
    started, on_wire, completed = posted
    assert isinstance(started, RequestStarted) and isinstance(on_wire, RequestOnWire) and on_wire.t_sent_unix == T_WIRE
    assert isinstance(completed, RequestCompleted) and completed.request_id == 7 and not completed.timing.ok
    assert completed.timing.error == "phasetop stopped timing it: RuntimeError: a bug in the meter"
