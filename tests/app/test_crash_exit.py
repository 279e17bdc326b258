"""A crash inside the UI exits 70 with one line on stderr, never 0 and never a traceback with its locals."""

from pathlib import Path

import tui.app.app
from tests.app.harness import settings
from tests.hostile import SECRET
from tui.app import launch
from tui.app.app import PhasetopApp
from tui.core.untrusted import forget_secrets, register_secret

CSS = str(Path(tui.app.app.__file__).with_name("phasetop.tcss"))
"""A subclass's relative CSS_PATH would be read beside this test."""


class CrashingApp(PhasetopApp):
    """The real app, headless, with a handler that raises (as a widget fed bad server data did)."""

    CSS_PATH = CSS

    def on_mount(self) -> None:
        super().on_mount()
        self.set_timer(0.2, self._crash)

    def _crash(self) -> None:
        raise ZeroDivisionError(f"float division by zero near {SECRET}")

    def run(self, **kwargs):
        return super().run(headless=True)


def test_a_crash_of_the_ui_exits_70_with_one_line_on_stderr(monkeypatch, capsys, sim_url):
    monkeypatch.delenv("PHASETOP_DEBUG", raising=False)
    monkeypatch.setattr(launch, "PhasetopApp", CrashingApp)
    register_secret(SECRET)
    try:
        code = launch.run_ui(settings(url=sim_url), url_given=True, save_runs=False)
    finally:
        forget_secrets()
    err = capsys.readouterr().err
    assert code == 70, err
    assert err.count("\n") == 1, err
    assert err.startswith("phasetop: internal error: ZeroDivisionError: float division by zero"), err
    assert "Traceback" not in err and SECRET not in err


def test_a_quit_still_exits_0(monkeypatch, capsys, sim_url):
    class QuittingApp(PhasetopApp):
        CSS_PATH = CSS

        def on_mount(self) -> None:
            super().on_mount()
            self.set_timer(0.2, self.exit)

        def run(self, **kwargs):
            return super().run(headless=True)

    monkeypatch.setattr(launch, "PhasetopApp", QuittingApp)
    assert launch.run_ui(settings(url=sim_url), url_given=True, save_runs=False) == 0
    assert capsys.readouterr().err == ""
