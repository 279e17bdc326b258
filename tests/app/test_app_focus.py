"""A UI that starts without the terminal's focus (a browser tab not yet focused: `phasetop web`) gets its pane's
focus and its footer's keys the moment a key or a click gives it the focus back."""

from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from tests.app.harness import settings, wait_for
from tests.loopback import closed_port_url
from tui.app.app import PhasetopApp


def footer_keys(app: PhasetopApp) -> list[str]:
    return [key.description for key in app.screen.query_one(Footer).query(FooterKey)]


async def test_a_ui_started_unfocused_shows_its_keys_once_a_key_focuses_it():
    app = PhasetopApp(settings(), closed_port_url(), save_runs=False)
    app.set_reactive(PhasetopApp.app_focus, False)  # the tab had not the focus when the UI started
    async with app.run_test(size=(158, 43)) as pilot:
        await pilot.pause(0.5)
        assert app.screen.focused is None and footer_keys(app) == []  # what the browser showed: no keys at all
        await pilot.press("down")  # the first key in the tab: Textual takes it as the focus's return
        await wait_for(pilot, lambda: "Help" in footer_keys(app), 5, lambda: f"footer keys {footer_keys(app)}")
        assert app.screen.focused.id == "timeline-pane"  # the pane a focused start gives
        await pilot.press("q")
