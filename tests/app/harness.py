"""The app tests' one harness: waiting on a running app under the pilot, the messages it saw, what it drew."""

from __future__ import annotations

import time
from collections.abc import Callable

from textual.app import App
from textual.geometry import Region
from textual.screen import Screen

from tui.app.messages import RequestCompleted, ServerCameUp
from tui.config import Settings
from tui.core.measure.records import RequestTiming
from tui.core.view.timeline import KEEP_LANES, batches, default_view, keep_count, lanes

CEILING = (3350e9 / 16e9, 131072.0, 16e9)
"""The simulator's default (an H100 SXM's 3,350 GB/s over Llama-3.1-8B's 16 GB) as `PhasetopApp` takes it: decode
ceiling tok/s, KV bytes per token, weight bytes."""


async def wait_for(pilot, condition, timeout_s: float = 20.0, what: str | Callable[[], str] = "condition") -> None:
    """Pause until `condition()` holds; a deadline, never a fixed sleep. `what` names it in the failure (a function:
    called then, so it can say the state the condition saw)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what() if callable(what) else what}: not met in {timeout_s:.0f} s")
        await pilot.pause(0.05)


def shows(app: App, kind: type[Screen]) -> bool:
    """The app's screen is a `kind` with its widgets in place (composed, its on_mount run): a screen pushed a
    moment ago is the app's screen before it has any, and a query then finds nothing."""
    return isinstance(app.screen, kind) and app.screen.is_mounted


def toasts(app: App) -> list[str]:
    """The text of every toast the app shows now."""
    return [str(n.message) for n in app._notifications]


async def wait_for_toast(pilot, *words: str, timeout_s: float = 10.0) -> None:
    """Pause until a toast holds every one of `words`: a screen's notify reaches the app as a message taken later,
    so a toast is waited for, never read the moment its cause is seen."""
    app = pilot.app
    await wait_for(pilot, lambda: any(all(w in t for w in words) for t in toasts(app)), timeout_s,
                   lambda: f"a toast saying {words} among {toasts(app)}")


def settings(runs_dir=None, **values) -> Settings:
    """Settings from these values alone (no .env, no user file); runs saved under `runs_dir` when given."""
    if runs_dir is not None:
        values["runs_dir"] = str(runs_dir)
    return Settings(_env_file=None, **values)


def seen_of(seen, kind) -> list:
    """Each message of a kind once (the hook can see one message at more than one pump)."""
    return list({id(m): m for m in seen if isinstance(m, kind)}.values())


def completed(seen) -> list[RequestCompleted]:
    """Each RequestCompleted once, in the order the requests were sent."""
    return sorted(seen_of(seen, RequestCompleted), key=lambda m: m.request_id)


def rendered(widget) -> str:
    """What a widget draws, as text, a line a row."""
    return "\n".join(strip.text for strip in widget.render_lines(Region(0, 0, *widget.size)))


def text_of(node, selector: str) -> str:
    """The text of the widget at `selector` on a screen (or on an app's screen)."""
    screen = node.screen if isinstance(node, App) else node
    return str(screen.query_one(selector).render())


async def started(pilot, seen) -> None:
    """Until the app saw its server come up."""
    await wait_for(pilot, lambda: any(isinstance(m, ServerCameUp) for m in seen), what="the server up")


async def send(pilot, seen, key: str, total: int) -> None:
    """Press a send's key and wait until `total` requests have completed in all."""
    await pilot.press(key)
    await wait_for(pilot, lambda: len(completed(seen)) == total, what=f"{total} requests completed")


def show_on_pane(pane, timings: list[RequestTiming], labels: list[str] | None = None) -> None:
    """Give a timeline pane on its own what the live session would publish: the timings, the kept ones as lanes, and
    the newest send's view."""
    batch_of = batches(timings)
    pane.lanes = lanes(timings, labels, keep=keep_count(batch_of, KEEP_LANES))
    pane.view = default_view(timings, batch_of)
    pane.timings = timings


class ScreenHost(App):
    """A host app with nothing but `screen`, in Textual's dark theme (over `css_path`: the app's stylesheet, or none)."""

    def __init__(self, screen: Screen, css_path: str | None = None) -> None:
        super().__init__(css_path=css_path)
        self._screen = screen

    def on_mount(self) -> None:
        self.theme = "textual-dark"
        self.push_screen(self._screen)
