"""Steps of the tuning loop under the pilot: the flags edited and a restart asked for, a workload of both phases."""

from __future__ import annotations

from textual.widgets import Input, RadioButton

from tests.app.harness import completed, shows, wait_for
from tui.app.screens.flags import FlagEditorScreen
from tui.core.measure.sends import Send
from tui.core.serving.serve_command import ServeCommand


async def type_flags(pilot, app, command: ServeCommand, rerun: str | None = None) -> None:
    """f, the command typed in, `rerun` picked (else what the editor picks first): the editor open, Enter not yet."""
    await pilot.press("f")
    await wait_for(pilot, lambda: shows(app, FlagEditorScreen))
    app.screen.query_one(Input).value = str(command)
    if rerun is not None:
        app.screen.query_one(f"#rerun-{rerun}", RadioButton).value = True


async def edit_flags(pilot, app, command: ServeCommand, rerun: str | None = None) -> None:
    """`type_flags`, the editor saying the flags changed, Enter."""
    await type_flags(pilot, app, command, rerun)
    await pilot.pause(0.1)
    assert "changed since the first start" in str(app.screen.query_one("#flags-changed").render())
    await pilot.press("enter")


async def restart_with(pilot, app, command: ServeCommand, rerun: str | None = None) -> None:
    """`type_flags`, Enter: whatever the command (a refused one, the same one again)."""
    await type_flags(pilot, app, command, rerun)
    await pilot.press("enter")


async def long_among_streams(pilot, screen, seen) -> None:
    """8 short streams, then the long prompt among them (its prefill stalls them while it runs), to their end."""
    screen.send_requests(Send(screen.state.live.send(8), "8 streams", None, 200, 8, 48))
    await wait_for(pilot, lambda: len(screen.timings) == 8 and all(len(t.token_offsets_s) >= 4 for t in screen.timings))
    screen.send_requests(Send(screen.state.live.send(1), "long", None, 2000, 1, 48))
    await wait_for(pilot, lambda: len(completed(seen)) == 9, 60)
