"""The flag editor as a dialog: Enter restarts from anywhere in it (the "run again" list's own Enter only picked),
the arrows there pick what runs, and a refused command comes back with the server's error beside it."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

from textual.app import App
from textual.widgets import Input, RadioSet

from tests.app.harness import wait_for
from tui.app.screens.flags import FlagEditorScreen
from tui.core.serving.serve_command import ServeCommand
from tui.core.serving.server_help import defaults_in_help
from tui.core.state.tuning_loop import NOTHING, PROBE, SENDS, Refusal, RestartRequest

COMMAND = ServeCommand.parse(shlex.join([sys.executable, "-m", "tui", "sim", "--port", "8123"]))
RERUNS = [(SENDS, "the last sends: short 200"), (PROBE, "the probe"), (NOTHING, "nothing")]


class _EditorHost(App):
    CSS_PATH = "../../tui/app/phasetop.tcss"

    def __init__(self, editor: FlagEditorScreen) -> None:
        super().__init__()
        self.editor = editor
        self.answers: list[RestartRequest | None] = []

    def on_mount(self) -> None:
        self.push_screen(self.editor, self.answers.append)


async def test_enter_on_the_run_again_list_restarts_with_what_the_arrows_picked():
    host = _EditorHost(FlagEditorScreen(COMMAND, COMMAND, RERUNS))
    async with host.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: host.screen is host.editor)
        host.editor.query_one(Input).value = str(COMMAND) + " --max-num-seqs 8"
        host.editor.query_one(RadioSet).focus()
        await pilot.press("down")  # from the last sends to the probe: the arrows pick
        await pilot.press("enter")
        await wait_for(pilot, lambda: host.answers)
    [answer] = host.answers
    assert answer.rerun == PROBE and answer.command.value("max-num-seqs") == "8"


async def test_a_refused_command_reopens_with_its_error_beside_it_and_the_same_rerun_picked():
    typo = ServeCommand.parse(str(COMMAND) + " --max-num-batched-tokens bogus")
    refusal = Refusal(typo, "the simulator did not start: argument --max-num-batched-tokens: invalid int value: 'bogus'")
    host = _EditorHost(FlagEditorScreen(COMMAND, COMMAND, RERUNS, refusal, NOTHING))
    async with host.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: host.screen is host.editor)
        editor = host.editor
        assert editor.query_one(Input).value == str(typo)
        refused = str(editor.query_one("#flags-refused").render())
        assert refused.startswith("refused: the simulator did not start: argument --max-num-batched-tokens: invalid")
        assert editor.query_one(RadioSet).pressed_button.id == f"rerun-{NOTHING}"
        await pilot.press("ctrl+w", *"512", "enter")  # the cursor ends the line: the typo's word, then the fix
        await wait_for(pilot, lambda: host.answers)
    [answer] = host.answers
    assert answer.rerun == NOTHING and answer.command.value("max-num-batched-tokens") == "512"


def test_the_flag_editor_names_a_flag_against_a_default_the_server_chooses_apart_from_those_that_differ():
    defaults = defaults_in_help((Path(__file__).parents[1] / "fixtures" / "help" / "vllm-0.32-help-all.txt").read_text())
    command = ServeCommand.parse("vllm serve m --max-num-batched-tokens 512 --gpu-memory-utilization 0.5 --no-enforce-eager")
    line = FlagEditorScreen._against_defaults(SimpleNamespace(_defaults=defaults), command).plain
    assert line == ("1 of 3 differ from the server's defaults: --gpu-memory-utilization 0.5 (default 0.92)"
                    " · 1 of 3 against no stated default: --max-num-batched-tokens 512 (default: the server's choice)"
                    " · as its defaults: --no-enforce-eager (default False)")
    alone = ServeCommand.parse("vllm serve m --max-num-batched-tokens 512")
    assert FlagEditorScreen._against_defaults(SimpleNamespace(_defaults=defaults), alone).plain == \
        "1 of 1 against no stated default: --max-num-batched-tokens 512 (default: the server's choice)"
