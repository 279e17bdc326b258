"""The tuning loop's state machine, without a screen: each path of a flag change — the sends run again, the
probe on both sides, a failed restart, the probe picked with nothing running, the editor cancelled — as the
effects it asks for."""

from __future__ import annotations

from tui.core.state.effects import Notify
from tui.core.measure.sends import Send
from tui.core.serving.serve_command import ServeCommand, Setting
from tui.core.state.tuning_loop import (EXPERIMENT, NOTHING, PROBE, SENDS, CompareBefore, CompareRuns, NewSession, Play,
                                        Refusal, ReopenEditor, RestartRequest, RunExperiment, Server, StartRestart,
                                        TuningLoop, restart_key_disabled)

COMMAND = ServeCommand.parse("vllm serve m --port 8000 --max-num-batched-tokens 2048")
CHANGED = COMMAND.with_setting(Setting("max-num-batched-tokens", "512"))
PROBE_SENDS = ((0.0, Send(0, "8 at once", None, 200, 8, 512)), (1.0, Send(0, "long 2000", None, 2000, 1, 128)))
SHORT = Send(1, "short 200", None, 200, 1, 128)


def up(session: int, command: ServeCommand = COMMAND, running: bool = True) -> Server:
    return Server(command, running, session)


def kinds(effects) -> list[type]:
    return [type(effect) for effect in effects]


def play(loop: TuningLoop, effects, first_id: int, server: Server) -> list:
    """The screen playing the `Play` among `effects`: each send goes out with ids from `first_id`, then every
    request ends; what the loop asks for then."""
    [played] = [e for e in effects if isinstance(e, Play)]
    ids = []
    for _after_s, send in played.workload:
        loop.sent(send, 100.0, 1_000.0)  # the screen's send_requests tells the loop, as any send
        ids.append(range(first_id, first_id + send.concurrency))
        loop.resent(ids[-1])
        first_id += send.concurrency
    after = []
    for sent in ids:
        after += loop.ended(sent, server)
    return after


def test_a_flag_change_restarts_then_sends_the_last_workload_again_then_opens_before_after():
    loop = TuningLoop(PROBE_SENDS)
    loop.sent(SHORT, 10.0, 1_000.0)
    loop.sent(SHORT, 11.0, 1_001.0)  # within the gap: one workload
    assert [key for key, _ in loop.reruns()] == [SENDS, PROBE, NOTHING]
    [restart] = loop.edited(RestartRequest(CHANGED, SENDS), up(1))
    assert restart == StartRestart(CHANGED, "--max-num-batched-tokens 2048 → 512")
    assert loop.restarted(None, up(1, CHANGED)) == [NewSession("phasetop restarted it: --max-num-batched-tokens 2048 → 512")]
    assert loop.session_identified(up(1, CHANGED)) == [], "the rerun waits for the new session"
    effects = loop.session_identified(up(2, CHANGED))
    assert kinds(effects) == [Notify, Play] and [s.label for _, s in effects[1].workload] == ["short 200", "short 200"]
    assert [after for after, _ in effects[1].workload] == [0.0, 1.0], "each as long after the first as it was"
    assert play(loop, effects, 10, up(2, CHANGED)) == [CompareBefore(1_000.0)]


def test_the_probe_runs_on_the_server_as_it_is_then_the_restart_then_again_then_before_after():
    loop = TuningLoop(PROBE_SENDS)
    effects = loop.edited(RestartRequest(CHANGED, PROBE), up(1))
    assert kinds(effects) == [Notify, Play] and effects[0].message.startswith("the probe first")
    assert play(loop, effects, 1, up(1)) == [StartRestart(CHANGED, "--max-num-batched-tokens 2048 → 512")]
    loop.restarted(None, up(2, CHANGED))  # its metrics already began the new session
    again = loop.session_identified(up(2, CHANGED))
    assert kinds(again) == [Notify, Play]
    assert play(loop, again, 20, up(2, CHANGED)) == [CompareBefore(1_000.0)]


def test_a_refused_restart_says_why_once_keeps_the_last_good_flags_and_reopens_the_editor_on_the_refused_command():
    loop = TuningLoop(PROBE_SENDS)
    refused = COMMAND.with_setting(Setting("bogus", "1"))
    loop.edited(RestartRequest(refused, SENDS), up(1))
    log = "loading…\nerror: unrecognized arguments: --bogus 1\nerror: unrecognized arguments: --bogus 1"
    refusal = Refusal(refused, "exited with status 2: error: unrecognized arguments: --bogus 1", log)
    said, new_session, reopen = loop.restarted(refusal, up(1))  # the last good command runs again
    assert said.severity == "error" and said.title == "server not restarted"
    assert said.message.count("unrecognized arguments") == 1, "the log line the error quotes is not said twice"
    assert said.message.splitlines()[1:] == ["loading…", "kept the last good flags: the server runs on them again "
                                                         "(refused: --bogus (none) → 1)"]
    assert new_session == NewSession("the last good flags again, after --bogus (none) → 1 was refused")
    assert reopen == ReopenEditor(refusal, SENDS), "the editor again, on the refused command, the same rerun picked"
    assert loop.session_identified(up(2)) == [], "no rerun after a refused restart"


def test_a_refusal_with_nothing_stopped_or_with_no_way_back_says_what_runs_now():
    loop = TuningLoop(PROBE_SENDS)
    loop.edited(RestartRequest(CHANGED.with_setting(Setting("port", "1")), SENDS), up(1))
    said, reopen = loop.restarted(Refusal(CHANGED, "the port is the UI's: keep --port 8000", stopped=False), up(1))
    assert "nothing was stopped: the server runs as it was" in said.message and isinstance(reopen, ReopenEditor)
    loop.edited(RestartRequest(CHANGED, SENDS), up(1))
    said, reopen = loop.restarted(Refusal(CHANGED, "exited", fallback_error="something already listens"),
                                  up(1, running=False))
    assert said.message.endswith("the last good flags did not start again either (something already listens): "
                                 "R starts them again")
    assert isinstance(reopen, ReopenEditor), "no NewSession: nothing runs"


def test_after_a_failed_restart_with_nothing_running_the_probe_picked_runs_after_the_next_restart_only():
    loop = TuningLoop(PROBE_SENDS)
    loop.edited(RestartRequest(CHANGED, SENDS), up(1))
    loop.restarted(Refusal(CHANGED, "exited", fallback_error="exited too"), up(1, running=False))
    # Fixed, the probe picked: nothing runs to probe before, so the restart goes now and the probe after it.
    effects = loop.edited(RestartRequest(CHANGED, PROBE), up(1, running=False))
    assert kinds(effects) == [Notify, StartRestart] and "the probe runs after it" in effects[0].message
    assert loop.restarted(None, up(1, CHANGED)) == [NewSession("phasetop restarted it: --max-num-batched-tokens 2048 → 512")]
    again = loop.session_identified(up(2, CHANGED))
    assert kinds(again) == [Notify, Play] and "alone" in again[0].message
    assert play(loop, again, 5, up(2, CHANGED)) == [], "nothing before it to compare"


def test_the_restart_key_acts_only_once_the_server_exited():
    assert restart_key_disabled("start_server_again", "running", True).startswith("the server phasetop runs is running")
    assert restart_key_disabled("start_server_again", "starting", True) == "the server is starting: wait for it"
    assert restart_key_disabled("start_server_again", "exited", True) is None


def test_the_same_command_again_the_editor_cancelled_and_nothing_to_rerun_ask_for_no_restart_or_say_so():
    loop = TuningLoop(PROBE_SENDS)
    assert loop.edited(None, up(1)) == []
    assert loop.edited(RestartRequest(COMMAND, SENDS), up(1)) == [], "the same command, running: nothing to do"
    assert kinds(loop.edited(RestartRequest(COMMAND, SENDS), up(1, running=False))) == [StartRestart], \
        "the same command, down (a failed restart): it starts again"
    loop.restarted(None, up(2))
    [said] = loop.session_identified(up(2))
    assert said.message == "restarted: send prompts, then b compares with before", "no sends were made to rerun"


def test_a_rerun_the_server_cannot_take_ends_the_workload_without_before_after():
    loop = TuningLoop(PROBE_SENDS)
    loop.sent(SHORT, 10.0, 1_000.0)
    loop.edited(RestartRequest(CHANGED, SENDS), up(1))
    loop.restarted(None, up(2, CHANGED))
    effects = loop.session_identified(up(2, CHANGED))
    assert kinds(effects) == [Notify, Play]
    loop.resent(None)  # the server was not known when the send came due
    assert loop.ended(range(1, 2), up(2, CHANGED)) == []


def test_an_experiment_runs_again_after_the_restart_and_before_after_compares_its_runs():
    loop = TuningLoop(PROBE_SENDS)
    before = {"params": {"vary": "prompt-tokens"}, "rows": [1]}
    assert loop.experiment_ran(before) == [] and loop.reruns()[0][0] == EXPERIMENT
    assert loop.experiment_ran({"params": {"vary": "disaggregation"}}) == [] and loop.experiment is before, \
        "an experiment on simulators of its own is no restart's"
    loop.edited(RestartRequest(CHANGED, EXPERIMENT), up(1))
    loop.restarted(None, up(2, CHANGED))
    assert kinds(effects := loop.session_identified(up(2, CHANGED))) == [Notify, RunExperiment]
    assert effects[1] == RunExperiment("prompt-tokens")
    after = {"params": {"vary": "prompt-tokens"}, "rows": [2]}
    [compared] = loop.experiment_ran(after)
    assert compared == CompareRuns(before, after, "prompt-length sweep before the restart against after it")
