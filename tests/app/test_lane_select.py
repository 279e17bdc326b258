"""Arrows select a timeline lane: the figures under the chart and the diagnosis speak of it, the chart marks it,
and a new send selects the newest again."""

from __future__ import annotations

from tests.app.harness import CEILING, completed, seen_of, send, settings, started, wait_for
from tui.app.app import PhasetopApp
from tui.app.messages import RequestOnWire, RequestStarted
from tui.app.widgets.timeline_pane import REPLOT_INTERVAL_S, TimelinePane
from tui.core.view.timeline import SELECTED_MARK


def figures(screen) -> str:
    return str(screen.query_one("#timeline-figures").render())


def marked(pane) -> list[str]:
    return [row.lane.label for row in pane.drawn.rows if row.tick_label.startswith(SELECTED_MARK)]


async def test_up_selects_the_older_lane_and_a_new_send_the_newest(sim_url):
    seen = []
    app = PhasetopApp(settings(), sim_url, "simulated H100 SXM · Llama-3.1-8B", CEILING, save_runs=False)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await started(pilot, seen)
        screen = app.screen
        pane = screen.query_one(TimelinePane)
        await send(pilot, seen, "1", 1)
        await send(pilot, seen, "2", 2)
        await wait_for(pilot, lambda: figures(screen).startswith("long 2000: TTFT"))
        short, long = [m.timing for m in completed(seen)]
        starts, on_wire = seen_of(seen, RequestStarted), seen_of(seen, RequestOnWire)
        assert [m.request_id for m in starts] == [m.request_id for m in on_wire] == [1, 2], "each request starts once"
        assert all(w.t_sent_unix >= s.t_sent_unix for s, w in zip(starts, on_wire, strict=True))
        assert [t.t_sent_unix for t in screen.timings] == [w.t_sent_unix for w in on_wire], "the wire's stamp is kept"
        assert f"TTFT {long.ttft_s * 1e3:,.1f} ms" in figures(screen)
        await wait_for(pilot, lambda: pane.drawn is not None and marked(pane) == ["long 2000"])
        await wait_for(pilot, lambda: "in flight" not in screen.diagnosis)  # it ended: its findings, if any
        assert screen.diagnosis == "" or screen.diagnosis.startswith("long 2000: ")

        pane.replot_interval_s = 60.0  # a frame budget no wait outlasts: a key's answer is drawn at once all the same
        await pilot.press("up", "down")
        assert marked(pane) == ["long 2000"]
        await pilot.press("up")
        assert marked(pane) == ["short 200"]
        pane.replot_interval_s = REPLOT_INTERVAL_S
        await wait_for(pilot, lambda: figures(screen).startswith("short 200: TTFT"))
        assert f"TTFT {short.ttft_s * 1e3:,.1f} ms" in figures(screen)
        assert "tokens 200 in" in figures(screen)
        assert screen.diagnosis == "" or screen.diagnosis.startswith("short 200: ")
        await pilot.press("up")  # the oldest stays selected
        assert figures(screen).startswith("short 200: ")

        said: list[str] = []
        screen.watch(screen, "diagnosis", lambda value: said.append(value), init=False)
        await pilot.press("2")  # a new send: its lane is selected, in flight until it ends
        await wait_for(pilot, lambda: len(completed(seen)) == 3)
        await wait_for(pilot, lambda: "in flight" not in screen.diagnosis)
        assert figures(screen).startswith("long 2000: TTFT")
        assert said and said[0] == "long 2000: in flight", said
        ended = said[said.index("long 2000: in flight"):]
        assert all(d == "long 2000: in flight" or d == "" or d.startswith("long 2000: ") for d in ended), said
        assert "short 200" not in "".join(said)
        await pilot.press("down")  # the newest stays selected
        assert figures(screen).startswith("long 2000: ")
        await pilot.press("q")


async def test_the_arrows_are_in_help_and_leave_the_prompt_box_its_own():
    app = PhasetopApp(settings(), "http://127.0.0.1:9", None, None, save_runs=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        keys = {b.binding.id for b in screen.active_bindings.values()}
        assert {"timeline.older", "timeline.newer"} <= keys
        text = screen.query_one("#prompt-text")
        text.focus()
        await pilot.press("a", "ctrl+j", "b", "up")  # Ctrl+J breaks the line (Enter sends)
        assert text.cursor_location == (0, 1), "up moved the prompt box's cursor"
        assert screen.selected_back == 0
