"""The main screen's state behind one face, without a screen: each fact handed on in the order the parts need, and
what the tuning loop asks of the lab done there, so the screen is left only IO to run."""

from __future__ import annotations

from tests.unit.test_lab_states import IDENTITY, at, kinds, request
from tui.core.serving.serve_command import ServeCommand
from tui.core.state.effects import Notify
from tui.core.state.lab import DropSave, Identify, Lab, SaveRun
from tui.core.state.live import LiveSession
from tui.core.state.main_state import (
    EXITED,
    RUNNING,
    STARTING,
    ExitNote,
    FindServer,
    ForgetScrapes,
    MainState,
    MarkDown,
    Running,
    StartMeters,
)
from tui.core.state.server_watch import Served, ServerWatch
from tui.core.state.tuning_loop import NewSession, RunExperiment, StartRestart, TuningLoop
from tui.core.telemetry.readings import MetricsSnapshot, Restart

CEILING = (209.0, 131072.0, 16e9)
COMMAND = ServeCommand.parse("vllm serve m --port 8000")


def main_state() -> MainState:
    times = iter(at(minute) for minute in range(100))
    return MainState(LiveSession(ServerWatch(CEILING)), Lab("http://h:8000", saving=True), TuningLoop([]), clock=lambda: next(times))


def up(state: MainState) -> None:
    assert kinds(state.server_up(Served("openai", "m"), fresh=True, max_model_len=8192)) == [MarkDown, Identify,
                                                                                             StartMeters]
    assert state.identified(1, IDENTITY, object(), 8192, None) == []


def test_a_restart_in_the_metrics_opens_the_labs_next_session_and_asks_for_the_server_again():
    state = main_state()
    up(state)
    restarted = MetricsSnapshot(t_unix=at(3).timestamp(), engine="vllm", window_s=1.0, restart=Restart(("start time moved",), {}, {}))
    effects = state.scraped(restarted)
    assert kinds(effects)[:2] == [Identify, Notify] and FindServer() in effects
    assert state.lab.sessions.current.number == 2 and state.server.metrics is restarted
    assert state.identified(2, IDENTITY, object(), 8192, None) == []
    assert state.lab.sessions.current.decode_ceiling_tok_s == 209.0, "the new session keeps the live ceiling"


def test_what_the_loop_asks_of_the_lab_is_done_there_and_only_io_reaches_the_screen():
    state = main_state()
    up(state)
    state.lab.request_completed(request(1))
    effects = state._for_screen([NewSession("restarted with new flags"), RunExperiment("concurrency"),
                                 StartRestart(COMMAND, "--max-num-seqs 8 → 16")])
    assert ForgetScrapes() in effects and not any(isinstance(e, (NewSession, RunExperiment)) for e in effects)
    assert DropSave in kinds(effects) and SaveRun in kinds(effects), "the old session saved as the lab does"
    assert state.lab.sessions.current.number == 2
    assert effects[-1] == StartRestart(COMMAND, "--max-num-seqs 8 → 16") and state.server_state == STARTING
    assert state.server.header.note == "restarting: --max-num-seqs 8 → 16"


def test_the_command_phasetop_runs_exiting_is_said_once_and_r_brings_it_back():
    state = main_state()
    up(state)
    effects = state.server_down(at(5).timestamp(), "refused", Running(COMMAND, running=False),
                                lambda: "exit status 1; last said: \x1b[31mCUDA OOM")
    assert kinds(effects) == [MarkDown, ExitNote, Notify] and state.server_state == EXITED
    assert effects[1].what == "the server phasetop runs exited (exit status 1; last said: \\x1b[31mCUDA OOM)"
    assert state.why_disabled("start_server_again", serves=True) is None
    assert kinds(state.server_down(at(6).timestamp(), "refused", Running(COMMAND, running=False), lambda: "")) == \
        [MarkDown], "said once, not at every failed poll"
    state.starting_again()
    assert state.why_disabled("start_server_again", serves=True) == "the server is starting: wait for it"
    assert state.started_again(None) == [ExitNote(None), Notify("the server is running again", "server started")]
    assert state.server_state == RUNNING
