"""Keys typed in one burst (a fast typist, tmux, a remote terminal) act in the order they were typed."""

from __future__ import annotations

from textual import events
from textual.app import App, ComposeResult
from textual.widgets import Input, TextArea

from tests.app.harness import settings, wait_for
from tui.app.app import PhasetopApp
from tui.app.screens.main import MainScreen
from tui.app.widgets.editing import EditArea, EditInput

KEY_NAMES = {" ": "space", "?": "question_mark"}


def burst(app: App, keys: list[str]) -> None:
    """Every key queued at once, as a terminal's one read of them is (pilot.press waits after each)."""
    for key in keys:
        character = next((c for c, name in KEY_NAMES.items() if name == key), key if len(key) == 1 else None)
        app.post_message(events.Key(key, character))


class Boxes(App):
    def compose(self) -> ComposeResult:
        yield EditInput("--max-num-seqs 256", id="input")
        yield EditArea("--max-num-seqs 256", id="area")


async def test_backspaces_and_end_in_a_burst_act_before_the_letters_behind_them():
    app = Boxes()
    async with app.run_test() as pilot:
        for box in (app.query_one(Input), app.query_one(TextArea)):
            box.focus()
            await pilot.pause()
            burst(app, ["home", "end", "backspace", "backspace", "backspace", *"bogus"])
            await pilot.pause(0.3)
            assert (box.value if isinstance(box, Input) else box.text) == "--max-num-seqs bogus"


async def test_a_sentence_typed_in_one_burst_at_start_is_the_prompt_not_the_shortcuts_its_letters_name(sim_url):
    app = PhasetopApp(settings(), sim_url, save_runs=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: screen.state.lab.server_info is not None)
        sentence = "Why is the sky blue?"  # h, i, s, t, b, l and ? are shortcuts outside the box
        burst(app, [KEY_NAMES.get(c, c) for c in sentence])
        await pilot.pause(0.5)
        assert screen.query_one("#prompt-text", TextArea).text == sentence
        assert app.screen is screen and isinstance(screen, MainScreen), "no experiment, no help"
