"""The tuning loop in the UI, on a simulator phasetop serves (`--serve`): f edits its flags, Enter restarts it,
the last sends run again as they ran, and before → after opens with the flag that changed; a flag the server
refuses leaves its own error line in a toast."""

from __future__ import annotations

import re
import shlex
import sys
from contextlib import asynccontextmanager

import pytest
from textual.widgets import Input, RadioButton

from tests.app.harness import completed, settings, shows, wait_for
from tests.app.tuning_steps import edit_flags, long_among_streams
from tests.loopback import closed_port_url
from tui.app.app import PhasetopApp
from tui.app.messages import ServedRestarted
from tui.app.screens.compare import CompareScreen
from tui.app.screens.flags import FlagEditorScreen
from tui.config import PollSettings
from tui.core.measure.sends import Send
from tui.core.serving.serve_command import ServeCommand, Setting
from tui.core.state.tuning_loop import Refusal
from tui.sources.servers.served_command import ServedCommand, listening, start_served

SETTLE_S = 1.5
"""The UI's first seconds (first paint, the server identified) keep its one core busy: streams read then
arrive in clumps and are rightly left out as delivery, not generation. Measured workloads wait this out."""


def serving(time_scale: int):
    """A simulator phasetop serves on a port of its own, `time_scale` times slower than the H100; stopped after."""
    port = int(closed_port_url().rsplit(":", 1)[1])
    command = ServeCommand.parse(shlex.join([sys.executable, "-m", "tui", "sim", "--port", str(port), "--time-scale",
                                             str(time_scale), "--max-num-batched-tokens", "2048"]))
    served = ServedCommand(command, command.url, start_served(command, 60), 60)
    yield served
    served.stop()
    assert not listening("127.0.0.1", port), "the served command is stopped"


@pytest.fixture
def served():
    """At the H100's speed: for what a test counts and reads, not what it times."""
    yield from serving(1)


@pytest.fixture
def served_slow():
    """4× slower than the H100: the long prompt's one-step stall (about 280 ms) stands far above a loaded box's jitter."""
    yield from serving(4)


@asynccontextmanager
async def measuring(served, seen):
    """The UI on the served simulator, its server identified and its first seconds waited out (`SETTLE_S`)."""
    app = PhasetopApp(settings(), served.url, save_runs=False, served=served)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: app.screen.state.lab.server_info is not None)
        await pilot.pause(SETTLE_S)
        yield app, pilot


@pytest.mark.timing  # the streams' worst gaps before and after: on a box loaded by other tests the meter reads late
async def test_a_flag_change_restarts_the_server_reruns_the_sends_and_compares(served_slow):
    served, seen = served_slow, []
    async with measuring(served, seen) as (app, pilot):
        screen = app.screen
        await long_among_streams(pilot, screen, seen)
        await edit_flags(pilot, app, served.command.with_setting(Setting("max-num-batched-tokens", "256")))
        await wait_for(pilot, lambda: shows(app, CompareScreen), 120)
        comparison = app.screen.comparison
        assert {(r["key"], r["before"], r["after"]) for r in comparison["config_diff"]} >= {("max_num_batched_tokens", "2048", "256")}
        assert len(completed(seen)) == 18, "the same 9 requests, sent again"
        itl_p99 = next(f for f in comparison["figures"] if f["label"] == "ITL p99")
        assert itl_p99["after"] < itl_p99["before"], "smaller prefill chunks: the streams' worst gaps shrink"
        assert served.command.value("max-num-batched-tokens") == "256"
        assert len(screen.state.lab.sessions.sessions) == 2, "the restart and its metrics' new start time: one new session"
        await pilot.press("escape", "q")


def requests_of(summary: str) -> int:
    """The requests a side's summary counts, those left out as delivery among them ("8 requests (1 timed delivery,
    not generation, left out), TTFT …": a stream read late on a loaded box is flagged, and still was sent)."""
    counted = re.match(r"(\d+) requests(?: \((\d+) timed delivery)?", summary)
    assert counted, summary
    return int(counted[1]) + int(counted[2] or 0)


async def test_the_probe_runs_on_both_sides_of_the_restart_and_only_it_is_compared(served):
    seen = []
    async with measuring(served, seen) as (app, pilot):
        screen = app.screen
        screen.send_requests(Send(screen.state.live.send(1), "typed", "hello", None, 1, 16))  # before the probe: not in it
        await wait_for(pilot, lambda: len(completed(seen)) == 1, 60)
        await edit_flags(pilot, app, served.command.with_setting(Setting("max-num-batched-tokens", "256")), "probe")
        await wait_for(pilot, lambda: shows(app, CompareScreen), 180)
        comparison = app.screen.comparison
        assert len(completed(seen)) == 1 + 9 + 9, "the probe (8 at once, then the long prompt) before and after"
        assert requests_of(comparison["before"]["summary"]) == 9, comparison["before"]["summary"]
        assert requests_of(comparison["after"]["summary"]) == 9, comparison["after"]["summary"]
        assert "the same workload on both" in app.screen.title
        assert {(r["key"], r["before"], r["after"]) for r in comparison["config_diff"]} >= {("max_num_batched_tokens", "2048", "256")}
        await pilot.press("escape", "q")


async def test_the_last_experiment_runs_again_after_the_restart_and_is_compared(served):
    from tui.app.screens.experiment import ExperimentScreen

    app = PhasetopApp(settings(), served.url, save_runs=False, served=served)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: screen.state.lab.server_info is not None)
        await pilot.press("x")  # the prefix-cache experiment
        await wait_for(pilot, lambda: shows(app, ExperimentScreen))
        await wait_for(pilot, lambda: app.screen.finding, 180)
        before_finding, before_rows = app.screen.finding, len(app.screen.rows)
        await pilot.press("escape")
        await edit_flags(pilot, app, served.command.with_setting(Setting("enable-prefix-caching", "off")), "experiment")
        await wait_for(pilot, lambda: shows(app, CompareScreen), 240)
        comparison = app.screen.comparison
        assert app.screen.title == "prefix cache before the restart against after it"
        assert ("enable_prefix_caching", "True", "False") in {(r["key"], r["before"], r["after"])
                                                             for r in comparison["config_diff"]}
        assert comparison["before"]["kind"] == comparison["after"]["kind"] == "sweep"
        await pilot.press("escape")
        after = app.screen
        assert isinstance(after, ExperimentScreen) and after.finding, "the rerun's own table stays under the compare"
        assert len(after.rows) == before_rows > 0, "the same experiment, row for row"
        assert ", prefix-cache hit" in before_finding and "no prefix-cache hit" in after.finding, after.finding
        await pilot.press("escape", "q")


async def test_a_restart_its_metrics_do_not_show_is_still_a_new_session_and_only_one(served):
    """A server with no start time that had counted nothing (llama.cpp scraped just before its first request was
    counted) restarts unseen by its metrics: phasetop made the restart, so the new session begins anyway. Here the
    metrics are read once, at start: only the restart itself can open the session the rerun waits for."""
    seen = []
    app = PhasetopApp(settings(poll=PollSettings(metrics_interval_s=3600)), served.url, save_runs=False, served=served)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: screen.state.lab.server_info is not None)
        screen.send_requests(Send(screen.state.live.send(1), "typed", "hello", None, 1, 8))
        await wait_for(pilot, lambda: len(completed(seen)) == 1, 60)
        await edit_flags(pilot, app, served.command.with_setting(Setting("max-num-batched-tokens", "256")))
        await wait_for(pilot, lambda: shows(app, CompareScreen), 60)
        assert [session.number for session in screen.state.lab.sessions.sessions] == [1, 2]
        assert screen.state.lab.sessions.current.restart_reasons == ("phasetop restarted it: --max-num-batched-tokens 2048 → 256",)
        assert len(completed(seen)) == 2
        await pilot.press("escape", "q")


async def test_a_refused_flag_keeps_the_last_good_flags_running_and_reopens_the_editor_on_the_typo(served):
    seen = []
    app = PhasetopApp(settings(), served.url, save_runs=False, served=served)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: screen.state.lab.server_info is not None)
        first_pid, notes = served.pid, []
        app.notify = lambda message, **kwargs: notes.append(message)
        typo = served.command.with_setting(Setting("max-num-batched-tokens", "bogus"))
        await edit_flags(pilot, app, typo)
        await wait_for(pilot, lambda: any("invalid int value: 'bogus'" in n for n in notes), 60)
        (toast,) = [n for n in notes if "invalid int value: 'bogus'" in n]
        assert "exited while starting (status 2)" in toast
        assert toast.count("invalid int value: 'bogus'") == 1, "the error's line once, not again from the log's tail"
        assert "kept the last good flags: the server runs on them again (refused: --max-num-batched-tokens 2048 → bogus)" \
            in toast
        assert served.running and served.pid != first_pid and served.command == served.first
        assert screen.simulator_state == "running"
        # The editor is open again on the refused command, the server's error beside it: the typo is one edit away.
        await wait_for(pilot, lambda: shows(app, FlagEditorScreen))
        editor = app.screen
        assert editor.query_one(Input).value == str(typo)
        assert "invalid int value: 'bogus'" in str(editor.query_one("#flags-refused").render())
        await wait_for(pilot, lambda: screen.server.down_since is None, 60)  # the last good flags answer again
        editor.query_one(Input).value = str(served.first.with_setting(Setting("max-num-batched-tokens", "512")))
        await pilot.press("enter")
        await wait_for(pilot, lambda: served.running and "max_num_batched_tokens=512" in (screen.server.config or ""), 60)
        await pilot.press("q")


async def test_after_a_restart_left_nothing_running_the_probe_restarts_it_then_probes_the_new_one(served):
    seen = []
    async with measuring(served, seen) as (app, pilot):
        screen, notes = app.screen, []
        app.notify = lambda message, **kwargs: notes.append(message)
        served.stop()  # as if the last good flags had not started again either
        screen.post_message(ServedRestarted(Refusal(served.first, "exited", fallback_error="exited too")))
        await wait_for(pilot, lambda: shows(app, FlagEditorScreen))
        assert screen.simulator_state == "exited" and screen.why_disabled("start_server_again") is None
        assert any("R starts them again" in n for n in notes)
        # The command as it first ran, and the probe: with nothing running there is no "before" to probe, so the
        # server starts again at once and the probe runs on it.
        app.screen.query_one(Input).value = str(served.first)
        app.screen.query_one("#rerun-probe", RadioButton).value = True
        await pilot.pause(0.1)
        await pilot.press("enter")
        await wait_for(pilot, lambda: served.running, 60)
        await wait_for(pilot, lambda: len(completed(seen)) == 9, 120)
        assert any("the server is down: restarting now" in n for n in notes)
        screen.send_requests(Send(screen.state.live.send(1), "typed", "hello", None, 1, 16))  # nothing left jammed
        await wait_for(pilot, lambda: len(completed(seen)) == 10, 60)
        await pilot.press("q")


async def test_o_shows_the_served_commands_log_filtered_as_you_type(served):
    from textual.widgets import TextArea

    from tui.app.screens.server_log import ServerLogScreen

    app = PhasetopApp(settings(), served.url, save_runs=False, served=served)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.screen.state.lab.server_info is not None)
        await pilot.press("o")
        await wait_for(pilot, lambda: shows(app, ServerLogScreen))
        logged = served.log_tail(2000).splitlines()
        text = app.screen.query_one(TextArea)
        await wait_for(pilot, lambda: text.text.splitlines()[:len(logged)] == logged)
        word = next(w for w in logged[0].split() if len(w) > 3)
        app.screen.query_one(Input).value = word.upper()  # case aside
        await wait_for(pilot, lambda: text.text and all(word.lower() in line.lower() for line in text.text.splitlines()))
        assert "of" in str(app.screen.query_one("#log-title").render())
        await pilot.press("escape")
        assert not isinstance(app.screen, ServerLogScreen)
        await pilot.press("q")


def test_the_log_filter_keeps_matching_lines_only():
    from tui.app.screens.server_log import matching

    lines = ["INFO ready", "WARNING slow", "info done"]
    assert matching(lines, "info") == ["INFO ready", "info done"] and matching(lines, "  ") == lines


async def test_the_flag_editor_completes_flags_from_the_servers_own_help(served_slow):
    served = served_slow
    app = PhasetopApp(settings(), served.url, save_runs=False, served=served)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.screen.state.lab.server_info is not None)
        await pilot.press("f")
        await wait_for(pilot, lambda: shows(app, FlagEditorScreen))
        editor = app.screen
        await wait_for(pilot, lambda: "from the server's --help" in str(editor.query_one("#flags-hint").render()), 60)
        defaults = editor.query_one("#flags-defaults")
        # The port aside; the flag that differs named in words, not by its colour alone.
        assert str(defaults.render()) == ("1 of 2 differ from the server's defaults: --time-scale 4 (default 1) · as its "
                                          "defaults: --max-num-batched-tokens 2048 (default 2048)")
        assert highlighted(defaults) == {"--time-scale 4 (default 1)"}, "2048 is the default; 4× is not"
        editor.query_one(Input).value = served.command.with_setting(Setting("max-num-batched-tokens", "256")).shown()
        await pilot.pause(0.1)
        assert highlighted(defaults) == {"--time-scale 4 (default 1)", "--max-num-batched-tokens 256 (default 2048)"}
        field = editor.query_one(Input)
        field.value = served.command.shown() + " --max-num-s"
        field.cursor_position = len(field.value)
        await pilot.pause(0.2)
        changed = editor.query_one("#flags-changed")
        assert str(changed.render()) == "as first started (typing --max-num-s: no change until it is whole)", \
            "a half-typed flag is no change"
        await pilot.press("right")  # accepts the suggestion
        assert field.value.endswith(" --max-num-seqs"), field.value
        notes = []
        app.notify = lambda message, **kwargs: notes.append(message)
        await pilot.press("enter")  # a flag that takes a value, given none: not whole yet, nothing restarted
        await pilot.pause(0.1)
        assert notes == ["--max-num-seqs is not whole yet: finish it (→ completes a flag) or delete it"]
        assert isinstance(app.screen, FlagEditorScreen) and served.pid is not None
        field.value += " 64"
        await pilot.pause(0.1)
        assert str(changed.render()) == "changed since the first start: --max-num-seqs (none) → 64"
        await pilot.press("escape", "q")


def highlighted(static) -> set[str]:
    """The parts of a Static's content drawn in the accent (the flags that differ from their defaults)."""
    content = static.render()
    return {content.plain[span.start:span.end] for span in content.spans if "$accent" in str(span.style)}


def test_a_restart_keeps_the_uis_port(served):
    from tui.sources.servers.managed_server import ServerStartError

    with pytest.raises(ServerStartError, match="the port is the UI's"):
        served.restart(served.command.with_setting(Setting("port", "1")))
    assert served.running, "refused before anything was stopped"
