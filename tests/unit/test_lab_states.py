"""The lab's state machine, without a screen: sessions across a restart and their saves, the load dial's keys, the
experiment keys and before → after, as the effects each event asks for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tui.core.state.effects import Notify
from tui.core.state.lab import (LOAD_CONCURRENCY, LOAD_RATE, NOT_KNOWN_YET, SAVE_DELAY_S, DropSave, Identify, Lab,
                          OpenComparison, OpenExperiment, SaveRun, SaveSoon, StartLoad, StopLoad, TurnLoad)
from tui.core.measure.load_steps import LOAD_RATES, LoadProgress
from tui.core.measure.records import RequestTiming
from tui.core.measure.sends import Send

START = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
IDENTITY = {"model": "m", "config": {}}


def at(minutes: float) -> datetime:
    return START + timedelta(minutes=minutes)


def request(minutes: float) -> RequestTiming:
    return RequestTiming(ok=True, t_sent_unix=at(minutes).timestamp(), token_offsets_s=(0.05, 0.06, 0.07),
                         prompt_tokens=200, output_tokens=3)


def known(lab: Lab, number: int) -> None:
    """The screen's identify worker answered for session `number`."""
    assert lab.identified(number, IDENTITY, info=object(), max_model_len=131072)


def kinds(effects) -> list[type]:
    return [type(effect) for effect in effects]


def test_the_first_server_up_opens_session_one_and_asks_who_it_is_until_it_is_known():
    lab = Lab("http://h:8000", saving=True)
    assert lab.server_up(at(0)) == [Identify(1)]
    assert lab.server_up(at(1)) == [Identify(1)], "not identified yet (the server went away): asked again"
    known(lab, 1)
    assert lab.server_up(at(2)) == []
    assert lab.sessions.current.number == 1 and not lab.has_before


def test_a_finished_request_arms_one_save_and_the_timer_saves_the_session_with_it():
    lab = Lab("http://h:8000", saving=True)
    lab.server_up(at(0))
    assert lab.request_completed(request(1)) == [SaveSoon(SAVE_DELAY_S)]
    assert lab.request_completed(request(2)) == [], "one timer at a time"
    [save] = lab.save_due(at(3))
    assert isinstance(save, SaveRun) and save.what == "session 1" and len(save.run["requests"]) == 2
    assert lab.request_completed(request(4)) == [SaveSoon(SAVE_DELAY_S)], "the next request arms it again"


def test_nothing_is_saved_by_a_lab_that_does_not_save():
    lab = Lab("http://h:8000", saving=False)
    lab.server_up(at(0))
    assert lab.request_completed(request(1)) == []
    assert lab.closing(at(2)) == []
    effects = lab.restarted(("flags changed",), at(3))
    assert not [e for e in effects if isinstance(e, SaveRun)]


def test_a_restart_saves_the_old_session_at_once_opens_the_next_and_keeps_the_old_as_before():
    lab = Lab("http://h:8000", saving=True)
    lab.server_up(at(0))
    known(lab, 1)
    lab.request_completed(request(1))
    effects = lab.restarted(("start time moved",), at(2))
    assert kinds(effects) == [DropSave, SaveRun, Identify, Notify]
    assert effects[1].what == "session 1" and effects[2] == Identify(2)
    assert "session 2 begins" in effects[3].message and "Press b to compare with before" in effects[3].message
    assert lab.has_before and lab.sessions.current.number == 2
    assert lab.server_info is None, "the new server is not known until it is identified"
    assert lab.sweep("concurrency") == [Notify(NOT_KNOWN_YET, "", "warning")]


def test_each_session_keeps_the_ceiling_of_its_own_server():
    lab = Lab("http://h:8000", saving=True)
    lab.ceiling_known(209.4)  # before any session: nothing to keep it
    lab.server_up(at(0))
    lab.ceiling_known(209.4)
    lab.request_completed(request(1))
    effects = lab.restarted(("model changed",), at(2))
    [saved] = [e for e in effects if isinstance(e, SaveRun)]
    assert saved.run["result"]["decode_ceiling_tok_s"] == 209.4
    lab.ceiling_known(None)  # the new server's ceiling not known (yet): the old one is not carried over
    lab.request_completed(request(3))
    [saved] = lab.closing(at(4))
    assert saved.run["result"]["decode_ceiling_tok_s"] is None
    lab.ceiling_known(1_200.0)
    lab.request_completed(request(5))
    [saved] = lab.closing(at(6))
    assert saved.run["result"]["decode_ceiling_tok_s"] == 1_200.0


def test_a_sweep_belongs_to_the_session_of_the_server_it_ran_on():
    lab = Lab("http://h:8000", saving=True)
    lab.server_up(at(0))
    rows = [{"value": 1}, {"value": 8}]
    lab.experiment_ran({"params": {"vary": "concurrency"}, "result": {"rows": rows}})
    lab.experiment_ran({"params": {"vary": "disaggregation"}, "result": {"rows": [{"setup": "1P1D"}]}})
    assert lab.sessions.current.sweeps == {"concurrency": rows}, "phasetop's own simulators are not this server"
    lab.restarted(("flags changed",), at(1))
    assert lab.sessions.current.sweeps == {}, "the sweep of the server before the restart is not the new one's"
    assert lab.sessions.sessions[0].sweeps == {"concurrency": rows}


def test_quitting_writes_the_session_a_timer_still_waited_on():
    lab = Lab("http://h:8000", saving=True)
    lab.server_up(at(0))
    assert lab.closing(at(1)) == [], "nothing waits"
    lab.request_completed(request(1))
    [save] = lab.closing(at(2))
    assert save.what == "session 1" and len(save.run["requests"]) == 1
    assert lab.closing(at(3)) == [], "written once"


def test_compare_before_waits_for_the_new_servers_flags_and_then_compares_the_same_workload():
    lab = Lab("http://h:8000", saving=False)
    lab.server_up(at(0))
    known(lab, 1)
    for minute in (1, 2, 3):
        lab.request_completed(request(minute))
    lab.restarted(("flags changed",), at(4))
    [wait] = lab.compare_before(at(5))
    assert isinstance(wait, Notify) and "still reading" in wait.message
    known(lab, 2)
    lab.request_completed(request(6))
    [opened] = lab.compare_before(at(7), since_unix=at(2).timestamp())
    assert isinstance(opened, OpenComparison) and "(the same workload on both)" in opened.title
    assert opened.title.startswith("Session 1 (before the restart) against session 2 (now)")


def test_the_load_dial_starts_only_on_a_known_server_turns_on_its_ladder_and_stops_with_its_note():
    lab = Lab("http://h:8000", saving=False)
    assert lab.why_disabled("turn_rate") is not None and lab.why_disabled("compare_before") is not None
    assert lab.turn_rate(2.0) == lab.turn_concurrency(2.0) == [Notify(lab.why_disabled("turn_rate"), "", "warning")]
    assert lab.toggle_load() == [Notify(NOT_KNOWN_YET, "", "warning")] and not lab.load_running
    lab.server_up(at(0))
    known(lab, 1)
    assert lab.toggle_load() == [StartLoad(LOAD_RATE, LOAD_CONCURRENCY)] and lab.load_running
    assert lab.why_disabled("turn_rate") is None
    up = LOAD_RATES[LOAD_RATES.index(LOAD_RATE) + 1]
    assert lab.turn_rate(2.0) == [TurnLoad(up, LOAD_CONCURRENCY)]
    assert lab.turn_concurrency(0.5) == [TurnLoad(up, LOAD_CONCURRENCY // 2)]
    lab.load_progressed(LoadProgress(None, 10, 9, 0, 1, 0, 5.0, 1.8), 0.05, 0.01, 1)
    assert lab.dial.progress.finished == 9 and lab.dial.bursts == 1
    assert lab.toggle_load() == [StopLoad()] and lab.load_running, "running until the requests in flight finish"
    assert lab.dial.note.startswith("stopping")
    assert lab.load_stopped({"completed": 9, "request_throughput": 1.8}, None) == []
    assert not lab.load_running and lab.dial.note == "stopped: 9 done at 1.80 req/s overall"
    lab.load_progressed(LoadProgress(None, 11, 10, 0, 1, 0, 6.0, 1.8), None, None, 0)
    assert lab.dial.progress.finished == 9, "a stopped dial keeps its last figures"
    assert lab.toggle_load() == [StartLoad(up, LOAD_CONCURRENCY // 2)], "it starts again where it was turned"


def test_a_load_that_could_not_run_says_why():
    lab = Lab("http://h:8000", saving=False)
    lab.server_up(at(0))
    known(lab, 1)
    lab.toggle_load()
    assert lab.load_stopped(None, "cannot connect") == [Notify("cannot connect", "load", "error")]
    assert lab.dial.note == "could not run: cannot connect" and not lab.load_running


def test_the_experiment_keys_need_the_server_but_for_those_that_start_their_own():
    lab = Lab("http://h:8000", saving=False)
    assert lab.sweep("concurrency") == [Notify(NOT_KNOWN_YET, "", "warning")]
    [own] = lab.sweep("disaggregation")
    assert isinstance(own, OpenExperiment) and own.plan.vary == "disaggregation", "it starts its own simulators"
    lab.server_up(at(0))
    lab.identified(1, IDENTITY, info=object(), max_model_len=64)
    [refused] = lab.sweep("prompt-tokens")
    assert isinstance(refused, Notify) and refused.severity == "error" and "cannot run here" in refused.title
    lab.identified(1, IDENTITY, info=object(), max_model_len=131072)
    [opened] = lab.sweep("prompt-tokens")
    assert isinstance(opened, OpenExperiment) and opened.plan.vary == "prompt-tokens"


def test_a_failed_save_is_a_warning_and_a_load_saved_is_said():
    lab = Lab("http://h:8000", saving=True)
    assert lab.run_saved("session 1", None, "disk full") == [Notify("disk full", "session 1: run not saved", "warning")]
    assert lab.run_saved("load", "2026-12-03T09-00-00-load", None) == [Notify("saved run 2026-12-03T09-00-00-load", "load")]
    assert lab.run_saved("session 1", "x", None) == [], "sessions save quietly"


def test_what_the_ui_sends_is_its_sessions_workload_and_before_after_names_a_difference():
    short, eight = Send(1, "short 200", None, 200, 1, 128), Send(2, "8 at once", None, 200, 8, 512)
    lab = Lab("http://h:8000", saving=True)
    lab.server_up(at(0))
    known(lab, 1)
    lab.sent(short, at(1).timestamp())
    lab.request_completed(request(1))
    [save] = lab.save_due(at(2))
    assert save.run["kind"] == "ui"
    assert save.run["params"]["sent"] == {"short 200": {"sends": 1, "concurrency": 1, "prompt_tokens": 200, "max_tokens": 128}}
    lab.sent(eight, at(3).timestamp())
    lab.restarted(("flags changed",), at(4))
    known(lab, 2)
    lab.sent(eight, at(5).timestamp())
    [opened] = lab.compare_before(at(6))
    assert opened.comparison["workload_differs"] == ["short 200 sends 1 → 0"]
    [same] = lab.compare_before(at(6), since_unix=at(3).timestamp())
    assert same.comparison["workload_differs"] == [], "the rerun's sends on both sides: the same workload"
