"""The whole app against a real simulator, and single panes in small host apps."""


from textual.app import App, ComposeResult

from tests.app.harness import CEILING, completed, settings, wait_for
from tui.app.app import PhasetopApp
from tui.app.messages import RequestCompleted, ServerCameUp, ServerWentDown
from tui.app.screens.help import HelpScreen
from tui.app.screens.main import MainScreen
from tui.app.widgets.prompt_pane import AnswerView, PromptPane
from tui.core.measure.delivery import Guard


async def test_short_preset_streams_and_the_figures_match_the_record(sim_url):
    seen = []
    app = PhasetopApp(settings(), sim_url, "simulated H100 SXM · Llama-3.1-8B", CEILING)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: any(isinstance(m, ServerCameUp) for m in seen))
        screen = app.screen
        assert isinstance(screen, MainScreen)
        status = str(screen.query_one("#status").render())
        assert "simulated H100 SXM" in status and "Llama-3.1-8B" in status and " up" in status
        await pilot.press("1")
        await wait_for(pilot, lambda: any(isinstance(m, RequestCompleted) for m in seen))
        await pilot.pause(0.1)
        [done] = completed(seen)
        timing = done.timing
        assert timing.ok and timing.prompt_tokens == 200 and timing.output_tokens == 128
        # The screen keeps the message's timing, with the delivery-burst judgement a loaded box can add.
        assert screen.timings[-1] == Guard(bandwidth_ceiling_tok_s=screen.decode_ceiling_tok_s).flagged([timing])[0]
        figures = str(screen.query_one("#timeline-figures").render())
        assert f"TTFT {timing.ttft_s * 1e3:,.1f} ms" in figures
        assert f"decode {timing.decode_tok_s:,.1f} tok/s" in figures
        assert "of the 209 tok/s ceiling" in figures
        answer = screen.query_one("#answer", AnswerView)
        assert answer.line_count >= 2
        await pilot.press("q")
    assert app.return_code in (0, None)


async def test_long_prompt_has_a_longer_prefill_than_short(slow_sim_url):
    seen = []
    app = PhasetopApp(settings(), slow_sim_url, None, None)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: any(isinstance(m, ServerCameUp) for m in seen))
        for n, key in enumerate("112", start=1):  # the first short may be a fresh server's cold start: compare the second
            await pilot.press(key)
            await wait_for(pilot, lambda: len(completed(seen)) == n)
        _, short, long = [m.timing for m in completed(seen)]
        assert not short.cold and long.prompt_tokens == 2000
        assert long.ttft_s > 3 * short.ttft_s
        assert [lane.label for lane in app.screen.lanes][-2:] == ["short 200", "long 2000"]


async def test_server_down_dims_the_panes_and_says_since_when():
    seen = []
    app = PhasetopApp(settings(), "http://127.0.0.1:9", None, None)  # port 9: nothing listens
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: any(isinstance(m, ServerWentDown) for m in seen))
        await pilot.pause(0.1)
        screen = app.screen
        assert "DOWN since" in str(screen.query_one("#status").render())
        assert screen.query_one("#status").has_class("-down")
        assert all(pane.has_class("-down") for pane in screen.query(".pane"))
        await pilot.press("1")  # sending to a server that is down is refused with a message, not a crash
        await pilot.pause(0.2)
        assert not any(isinstance(m, RequestCompleted) for m in seen)


async def test_help_screen_lists_every_key_from_the_bindings():
    app = PhasetopApp(settings(), "http://127.0.0.1:9", None, None)
    async with app.run_test(size=(120, 40)) as pilot:
        main = app.screen
        await pilot.press("question_mark")
        await pilot.pause(0.1)
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-body Static").render())
        for binding in MainScreen.BINDINGS:
            hidden = main.check_action(binding.action.partition("(")[0], ()) is False  # R: no simulator of ours
            assert (binding.description in text) != hidden, binding.description
        assert "Quit" in text
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert isinstance(app.screen, MainScreen)


async def test_palette_offers_every_action():
    app = PhasetopApp(settings(), "http://127.0.0.1:9", None, None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.1)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert {"Send", "Long 2000", "Short 200", "Clear"} <= set(titles)
        assert "Start the server again" not in titles, "phasetop runs no server here: nothing to start again"


class _PromptHost(App):
    CSS_PATH = "../../tui/app/phasetop.tcss"

    def compose(self) -> ComposeResult:
        yield PromptPane(id="prompt-pane")


async def test_model_output_is_shown_literally_never_as_markup_or_escapes():
    app = _PromptHost()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(PromptPane)
        pane.start_answer("answer")
        pane.append_answer("[bold red]x[/] [link=https://evil.example]y[/link] \x1b[31mred\x1b[0m \x1b]0;title\x07")
        await pilot.pause(0.05)
        text = "\n".join(app.query_one(AnswerView).lines)
        assert "[bold red]x[/]" in text and "[link=https://evil.example]y[/link]" in text
        assert "\x1b" not in text and "\x07" not in text
        assert "red" in text
