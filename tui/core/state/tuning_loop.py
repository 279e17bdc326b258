"""The tuning loop as a state machine: a flag edited, the served command restarted, the workload picked run again
on the new server, before → after opened once it ends.

Each event (a send, the editor's answer, the restart's outcome, the new server identified, requests ended)
returns the effects the screen runs: notify, restart, play a workload, open before → after, run an experiment.
No IO and no clock here: the screen says when and what it knows (`Server`), so every path — a failed restart,
the probe picked with nothing running, the editor cancelled — is a plain call in a test."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tui.core.experiments.plans import EXPERIMENT_NAMES, OWN_SIMULATORS
from tui.core.measure.sends import Send
from tui.core.serving.serve_command import ServeCommand, changed_flags
from tui.core.state.effects import Notify
from tui.core.untrusted import one_line

WORKLOAD_GAP_S = 5.0
"""Sends less than this apart are one workload (8 at once, then the long prompt among them): a flag change sends
them all again, each as long after the first as it was."""
SENDS, EXPERIMENT, PROBE, NOTHING = "sends", "experiment", "probe", "nothing"
"""What a restart runs again (the flag editor's choice)."""
PROBE_AFTER = "probe after"
"""The probe picked while no server ran (a restart had failed): it runs after the restart only."""

Workload = Sequence[tuple[float, Send]]
"""Sends, each with its time after the first of them."""


@dataclass(frozen=True, slots=True)
class RestartRequest:
    """What the flag editor asks for: start `command`, then run `rerun` (one of the ids it was offered) again."""

    command: ServeCommand
    rerun: str


@dataclass(frozen=True, slots=True)
class Server:
    """What the screen knows of the served command when it tells the loop something."""

    command: ServeCommand
    running: bool
    session: int
    """The current session's number (0: none yet)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A restart whose command did not start, and what runs now."""

    command: ServeCommand
    """The command refused (the flag editor reopens on it)."""
    error: str
    """The server's own reason (its last line), or phasetop's."""
    log_tail: str = ""
    stopped: bool = True
    """The server was stopped for it (False: refused before, the server runs as it was)."""
    fallback_error: str | None = None
    """Why the last good command, started again in its place, did not start either (None: it runs)."""


# ---- effects: what the screen does ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StartRestart:
    """Start `command` in place of the one running; `changes` says what differs (the header's note)."""

    command: ServeCommand
    changes: str


@dataclass(frozen=True, slots=True)
class NewSession:
    """The restart is not in the server's metrics yet: a new session begins now, for `reason`, and the old
    process's readings are no baseline."""

    reason: str


@dataclass(frozen=True, slots=True)
class Play:
    """Send each of `workload` as long after the first as it says, telling the loop `resent` for each."""

    workload: tuple[tuple[float, Send], ...]


@dataclass(frozen=True, slots=True)
class CompareBefore:
    """Open before → after over the sessions either side of the restart (`since_unix`: the one before counts
    its requests from then on, the workload run again; None: all)."""

    since_unix: float | None


@dataclass(frozen=True, slots=True)
class RunExperiment:
    """Run the experiment `vary` again; its run comes back to `experiment_ran`."""

    vary: str


@dataclass(frozen=True, slots=True)
class ReopenEditor:
    """Open the flag editor again on `refusal`'s command, its error beside it, `rerun` picked as before."""

    refusal: Refusal
    rerun: str


@dataclass(frozen=True, slots=True)
class CompareRuns:
    """Open before → after over two runs of one experiment."""

    before: dict[str, Any]
    after: dict[str, Any]
    title: str


Effect = Notify | StartRestart | NewSession | Play | CompareBefore | RunExperiment | CompareRuns | ReopenEditor


@dataclass(frozen=True, slots=True)
class _Then:
    """What follows once the workload playing has ended: before → after (from `since_unix`), the restart after
    a probe, or nothing (the probe after a failed restart has no before)."""

    compare: bool = False
    since_unix: float | None = None
    restart: ServeCommand | None = None


@dataclass
class TuningLoop:
    """The loop's state for one main screen; `probe` is the fixed workload a restart can run on both sides."""

    probe: Workload
    workload: list[tuple[float, Send]] = field(default_factory=list)
    """The latest sends, each with its time after the first of them: what a flag change sends again."""
    experiment: dict[str, Any] | None = None
    """The last experiment's run (on this server): what an experiment rerun compares with."""
    _workload_started: float = 0.0
    _last_sent: float = 0.0
    _workload_unix: float = 0.0
    """When the latest workload's first send went (monotonic, and wall clock to find its requests in a session)."""
    _rerun: str = NOTHING
    """What the restart under way runs again once the new server is identified."""
    _before_since: float | None = None
    """Set by a restart that reruns sends: when the workload began on the server before it."""
    _rerun_after: int | None = None
    """Set by a restart: the session number before it; the rerun goes once a later one is identified."""
    _restarting: tuple[int, str] | None = None
    """The restart under way: the session number before it, and what it changes."""
    _playing: set[int] = field(default_factory=set)
    """The requests of the workload playing that still run."""
    _unsent: int = 0
    """Sends of the workload playing not made yet."""
    _then: _Then | None = None
    _experiment_before: dict[str, Any] | None = None
    """Set while an experiment reruns after a restart: its run from before."""

    # ---- what the editor offers ------------------------------------------------------------------

    def reruns(self) -> list[tuple[str, str]]:
        """What a restart can run again, the likeliest first: the last sends, the last experiment, the probe."""
        reruns = []
        if self.workload:
            reruns.append((SENDS, "the last sends: " + ", ".join(send.label for _, send in self.workload)))
        if self.experiment is not None:
            reruns.append((EXPERIMENT, f"the last experiment: {EXPERIMENT_NAMES[self.experiment['params']['vary']]}"))
        first, then = (send.label for _, send in self.probe)
        reruns.append((PROBE, f"the probe, before and after: {first}, then {then} among them"))
        reruns.append((NOTHING, "nothing (send, then b compares)"))
        return reruns

    # ---- events ----------------------------------------------------------------------------------

    def sent(self, send: Send, now_s: float, now_unix: float) -> None:
        """A send of the user's (monotonic `now_s`): it joins the workload unless the last was long ago."""
        if not self.workload or now_s - self._last_sent > WORKLOAD_GAP_S:
            self.workload, self._workload_started, self._workload_unix = [], now_s, now_unix
        self.workload.append((now_s - self._workload_started, send))
        self._last_sent = now_s

    def edited(self, restart: RestartRequest | None, server: Server) -> list[Effect]:
        """The editor's answer (None: cancelled). For the probe, it runs first on the server as it is (so both
        sides ran it), then the restart; with nothing running (a restart failed) it can only run after."""
        if restart is None or (restart.command == server.command and server.running):
            return []
        self._rerun = restart.rerun
        if restart.rerun == PROBE and not server.running:
            self._rerun = PROBE_AFTER
            return [Notify("the server is down: restarting now; the probe runs after it, with nothing before it to "
                           "compare", "probe"), *self._begin_restart(restart.command, server)]
        if restart.rerun == PROBE:
            return [Notify("the probe first, on the server as it is; then the restart", "probe"),
                    self._play(self.probe, _Then(restart=restart.command))]
        return self._begin_restart(restart.command, server)

    def restarted(self, refusal: Refusal | None, server: Server) -> list[Effect]:
        """The restart's outcome: on success a new session (unless the metrics already began one); on a refusal the
        server's error (with the log's last lines it does not already quote), what runs now, no rerun, and the
        editor again on the refused command so the typo is one edit away."""
        before, changes = self._restarting or (0, "")
        self._restarting = None
        if refusal is None:
            return [NewSession(f"phasetop restarted it: {changes}")] if server.session <= before else []
        self._rerun_after = None
        error = one_line(refusal.error, 300)
        tail = "\n".join(line for line in (one_line(line, 200) for line in refusal.log_tail.splitlines()[-3:])
                         if line not in error)
        refused = "; ".join(changed_flags(server.command, refusal.command)) or "the same flags"
        effects: list[Effect] = [Notify(f"{error}\n{tail}".strip() + "\n" + _what_runs_now(refusal, refused),
                                        "server not restarted", "error", 30)]
        if refusal.stopped and server.running and server.session <= before:
            effects.append(NewSession(f"the last good flags again, after {refused} was refused"))
        return [*effects, ReopenEditor(refusal, self._rerun)]

    def session_identified(self, server: Server) -> list[Effect]:
        """A session was identified: after a restart, the new server's; the picked workload runs again."""
        if self._rerun_after is None or server.session <= self._rerun_after:
            return []
        self._rerun_after = None
        if self._rerun == EXPERIMENT and self.experiment is not None:
            self._experiment_before = self.experiment
            return [Notify("restarted: the experiment again, then before → after", "server restarted"),
                    RunExperiment(self.experiment["params"]["vary"])]
        if self._rerun == PROBE_AFTER:
            return [Notify("restarted: the probe, on the new server alone", "server restarted"),
                    self._play(self.probe, _Then())]
        workload = self.workload if self._rerun == SENDS else self.probe if self._rerun == PROBE else []
        if not workload:
            return [Notify("restarted: send prompts, then b compares with before", "server restarted")]
        labels = ", ".join(send.label for _, send in workload)
        return [Notify(f"restarted: sending {labels} again, then before → after", "server restarted"),
                self._play(workload, _Then(compare=True, since_unix=self._before_since))]

    def resent(self, request_ids: range | None) -> None:
        """One of the playing workload's sends went out with `request_ids` (None: it could not, the server not
        being known: the screen said so, and nothing is left to wait for)."""
        self._unsent -= 1
        if request_ids is None:
            self._playing.clear()
            self._then = None
        else:
            self._playing |= set(request_ids)

    def ended(self, request_ids: range, server: Server) -> list[Effect]:
        """Requests ended (finished, failed, or never sent): once the playing workload's last has, what follows."""
        if self._playing.isdisjoint(request_ids):
            return []
        self._playing.difference_update(request_ids)
        if self._playing or self._unsent or self._then is None:
            return []
        then, self._then = self._then, None
        if then.restart is not None:
            return self._begin_restart(then.restart, server)
        return [CompareBefore(then.since_unix)] if then.compare else []

    def experiment_ran(self, run: dict[str, Any]) -> list[Effect]:
        """An experiment ended with rows: after a restart's rerun, before → after over it; else it is the last."""
        before, self._experiment_before = self._experiment_before, None
        if run["params"]["vary"] in OWN_SIMULATORS:
            return []  # it ran on simulators of its own, not on this server: no restart changes it
        self.experiment = run
        if before is None or before["params"]["vary"] != run["params"]["vary"]:  # not the one the rerun was for
            return []
        name = EXPERIMENT_NAMES[run["params"]["vary"]]
        return [CompareRuns(before, run, f"{name} before the restart against after it")]

    # ---- steps -----------------------------------------------------------------------------------

    def _begin_restart(self, command: ServeCommand, server: Server) -> list[Effect]:
        self._rerun_after = server.session
        self._before_since = self._workload_unix if self._rerun in (SENDS, PROBE) else None
        changes = "; ".join(changed_flags(server.command, command)) or "the same flags"
        self._restarting = (server.session, changes)
        return [StartRestart(command, changes)]

    def _play(self, workload: Workload, then: _Then) -> Play:
        """Play `workload`, then `then`. It is a workload of its own (what a later restart sends again), whatever
        was sent just before it."""
        self._unsent, self._then, self.workload = len(workload), then, []
        return Play(tuple(workload))


def _what_runs_now(refusal: Refusal, refused: str) -> str:
    """The line after a refusal's error: the user's way back."""
    if not refusal.stopped:
        return f"nothing was stopped: the server runs as it was (refused: {refused})"
    if refusal.fallback_error is None:
        return f"kept the last good flags: the server runs on them again (refused: {refused})"
    return (f"the last good flags did not start again either ({one_line(refusal.fallback_error, 200)}): "
            "R starts them again")


def restart_key_disabled(action: str, server_state: str, serves: bool) -> str | None:
    """Why a restart key cannot act now, or None: `server_state` of the server phasetop runs ("running", "exited",
    "starting"); `serves`: phasetop runs a served command (--serve, or the simulator it started)."""
    if action == "start_server_again" and server_state == "starting":
        return "the server is starting: wait for it"
    if action == "start_server_again" and server_state != "exited":
        return "the server phasetop runs is running: R starts it again once it has exited"
    if action in ("edit_flags", "server_log") and not serves:
        return "phasetop did not start this server: run it as `phasetop --serve \"CMD\"` to restart it with new flags"
    if action == "edit_flags" and server_state == "starting":
        return "the server is starting: wait for it"
    return None
