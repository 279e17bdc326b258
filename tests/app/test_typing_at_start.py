"""A person who starts typing at once writes a prompt: the keys no shortcut takes open the prompt box."""

from textual.widgets import TextArea

from tests.app.harness import completed, seen_of, settings, wait_for
from tui.app.app import PhasetopApp
from tui.app.messages import RequestStarted
from tui.app.screens.main import MainScreen


async def test_a_sentence_typed_at_start_lands_in_the_prompt_box_and_starts_nothing(sim_url):
    seen = []
    app = PhasetopApp(settings(), sim_url, save_runs=False)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: screen.state.lab.server_info is not None)
        sentence = "Why is the sky blue? Explain it in 3 lines, please."
        await pilot.press(*[{" ": "space", "?": "question_mark", ",": "comma", ".": "full_stop"}.get(c, c) for c in sentence])
        await pilot.pause(0.2)
        box = screen.query_one("#prompt-text", TextArea)
        assert box.text == sentence and app.focused is box
        assert isinstance(app.screen, MainScreen), "no experiment opened, no help screen"
        assert not [m for m in seen if isinstance(m, RequestStarted)], "nothing sent while typing"
        await pilot.press("escape")  # out of the box: keys are shortcuts again
        assert app.focused is not box
        await pilot.press("s")  # sends what was typed (it sent the short preset: the answer's box was read)
        await wait_for(pilot, lambda: len(completed(seen)) == 1, 60)
        [typed] = {m.request_id: m for m in seen_of(seen, RequestStarted)}.values()
        assert typed.label == "typed" and typed.prompt_tokens is None, "the sentence, not a preset's prompt"
        await pilot.press("1")
        await wait_for(pilot, lambda: len(completed(seen)) == 2, 60)


async def test_tab_goes_to_the_prompt_box_not_through_every_button(sim_url):
    app = PhasetopApp(settings(), sim_url, save_runs=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.screen.state.lab.server_info is not None)
        await pilot.press("tab")
        assert app.focused is app.screen.query_one("#prompt-text", TextArea)


async def test_enter_in_the_prompt_box_sends_ctrl_j_breaks_the_line_and_the_footer_names_the_keys_that_work(sim_url):
    seen = []
    app = PhasetopApp(settings(), sim_url, save_runs=False)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: screen.state.lab.server_info is not None)
        await pilot.press("tab", *"hi", "ctrl+j", *"there")  # (h alone is a shortcut: Tab goes to the box)
        box = screen.query_one("#prompt-text", TextArea)
        assert box.text == "hi\nthere", "Ctrl+J is a line break, not a send"
        assert not seen_of(seen, RequestStarted)
        # While typing, the one-letter keys are the box's letters: the footer shows the keys that work there instead.
        footer = {b.binding.description for b in screen.active_bindings.values() if b.binding.show}
        assert {"Send", "New line", "Back to the keys"} <= footer and "Clear" not in footer, footer
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(completed(seen)) == 1, 60)
        [typed] = {m.request_id: m for m in seen_of(seen, RequestStarted)}.values()
        assert typed.label == "typed" and box.text == "hi\nthere", "sent as typed, the text kept to send again"
        assert app.focused is box, "still typing: Enter sent, it did not leave the box"
