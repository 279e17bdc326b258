"""The projector theme: registered, applied from the settings, and a theme picked in the UI remembered in the config file."""

import tomllib
import typing

from tests.app.harness import wait_for_toast
from tui.app.app import PhasetopApp
from tui.app.themes import PROJECTOR
from tui.config import Settings, ThemeName

URL = "http://127.0.0.1:9"  # never called: live=False


def make_app(theme_file=None, **values) -> PhasetopApp:
    return PhasetopApp(Settings(_env_file=None, **values), URL, live=False, theme_file=theme_file)


async def test_the_settings_name_every_theme_the_app_has_and_no_other():
    app = make_app()
    async with app.run_test(size=(120, 40)):
        assert set(typing.get_args(ThemeName)) == set(app.available_themes)


async def test_the_theme_setting_is_applied_and_the_projector_is_bright_on_black():
    app = make_app(theme="phasetop-projector")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.theme == "phasetop-projector"
        variables = app.get_css_variables()
        assert variables["background"] == "#000000"
        assert variables["foreground"] == "#FFFFFF"
        assert variables["text"] == "#FFFFFF"
        assert variables["text-muted"] == "#E0E0E0", "muted text stays near white, not Textual's 60 %"
    assert PROJECTOR.dark


async def test_a_theme_picked_in_the_ui_is_written_to_the_config_file_and_nothing_else(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('# mine\nurl = "http://127.0.0.1:9"\n\n[sim]\ngpu = "H200"\n')
    app = make_app(theme_file=config)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.theme == "textual-dark"
        assert "theme" not in config.read_text(), "the theme applied at start is not written"
        app.theme = "phasetop-projector"
        await pilot.pause()
        await pilot.pause()
    assert tomllib.loads(config.read_text()) == {"url": "http://127.0.0.1:9", "theme": "phasetop-projector", "sim": {"gpu": "H200"}}
    assert config.read_text().startswith("# mine\n")


async def test_with_no_config_file_named_a_picked_theme_is_not_written(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.theme = "nord"
        await pilot.pause()
        await pilot.pause()
    assert list(tmp_path.iterdir()) == []


async def test_a_file_it_cannot_rewrite_says_so_in_a_toast_and_stays_as_it_was(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('url = "unterminated\n')
    app = make_app(theme_file=config)
    async with app.run_test(size=(120, 40)) as pilot:
        app.theme = "nord"
        await wait_for_toast(pilot, "nord is not remembered")
    assert config.read_text() == 'url = "unterminated\n'
