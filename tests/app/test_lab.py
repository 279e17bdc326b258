"""The lab against real simulators: an experiment's finding on screen, before/after a restart, the runs view, the load dial.

Runs go to a tmp runs dir (Settings.runs_dir). Timing margins are wide: 2 shared cores.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from urllib.parse import urlsplit

from textual.widgets import DataTable, Static
from textual.widgets._toast import Toast
from textual.worker import WorkerState

from tests.app.harness import CEILING, seen_of, settings, shows, text_of, wait_for
from tui.app.app import PhasetopApp
from tui.app.lab_messages import ExperimentFinished, LoadProgressed, LoadStopped, SessionIdentified
from tui.app.messages import RequestCompleted
from tui.app.screens.compare import CompareScreen
from tui.app.screens.experiment import ExperimentChart, ExperimentScreen
from tui.app.screens.main import MainScreen
from tui.app.screens.runs import RunsScreen
from tui.cli.main import main as phasetop
from tui.core.runs.run_record import compare_runs, new_run
from tui.core.measure.stats import summarize
from tui.runs_store import save_run
from tui.sources.servers.simulator_server import SimulatorProcess


def saved_runs(runs_dir) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(runs_dir.glob("*.json"))]


async def test_prompt_length_experiment_shows_its_finding_chart_and_table(sim_url, tmp_path):
    seen = []
    app = PhasetopApp(settings(tmp_path / "runs"), sim_url, None, CEILING)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: seen_of(seen, SessionIdentified), what="server identified")
        await pilot.press("p")
        await wait_for(pilot, lambda: shows(app, ExperimentScreen), 5, "experiment screen")
        screen = app.screen
        await wait_for(pilot, lambda: seen_of(seen, ExperimentFinished), 180, "experiment finished")
        await pilot.pause(0.2)
        [finished] = seen_of(seen, ExperimentFinished)
        assert finished.error is None
        rows = finished.result.rows
        assert [r["prompt_tokens"] for r in rows] == [200, 500, 1000, 2000]
        # The seed's claim: TTFT climbs with the prompt, decode stays (margins far inside the physics' ×10 and −1.5 %).
        assert rows[-1]["ttft_s"] > 3 * rows[0]["ttft_s"]
        assert abs(rows[-1]["decode_tok_s"] / rows[0]["decode_tok_s"] - 1) < 0.15
        finding = text_of(screen, "#experiment-finding")
        assert finding == finished.result.finding
        assert finding.startswith("TTFT ×") and "from 200 to 2,000 tokens" in finding and "decode" in finding
        table = screen.query_one("#experiment-table", DataTable)
        assert table.row_count == 4
        assert not screen.query("#experiment-scaled")  # 2,000 + 64 tokens fit the simulator's 131,072 as they are
        assert str(table.get_row_at(3)[0]) == "2,000"
        assert screen.query_one(ExperimentChart).rows == list(rows)
        await pilot.press("escape")
        await wait_for(pilot, lambda: shows(app, MainScreen), 5, "back on the main screen")
        await wait_for(pilot, lambda: any(r["kind"] == "sweep" for r in saved_runs(tmp_path / "runs")), 10, "sweep saved")
    [sweep] = [r for r in saved_runs(tmp_path / "runs") if r["kind"] == "sweep"]
    assert sweep["result"]["finding"] == finding and sweep["params"]["vary"] == "prompt-tokens"
    assert len(sweep["requests"]) == 12  # 4 lengths × 3 repeats, the raw timings


async def test_an_experiment_scaled_to_fit_a_small_server_says_so_on_screen(tmp_path):
    """On a 4,096-token server the 4,000-token interference prompt comes down to 3,900, in a line above the progress."""
    seen = []
    with SimulatorProcess.start(["--max-model-len", "4096"]) as small:
        app = PhasetopApp(settings(tmp_path / "runs"), small.url, None, CEILING, save_runs=False)
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            await wait_for(pilot, lambda: seen_of(seen, SessionIdentified), what="server identified")
            await pilot.press("i")
            await wait_for(pilot, lambda: shows(app, ExperimentScreen), 5, "experiment screen")
            screen = app.screen
            note = screen.query_one("#experiment-scaled", Static)
            assert str(note.render()) == (
                "scaled long prompt tokens 4,000 → 3,900 to fit max_model_len 4,096 (128 tokens kept free)")
            assert note.display and note.region.height >= 1  # on screen, not merely in the DOM
            await wait_for(pilot, lambda: seen_of(seen, ExperimentFinished), 120, "experiment finished")
            [finished] = seen_of(seen, ExperimentFinished)
            assert finished.error is None and [r["prompt_tokens"] for r in finished.result.rows] == [3900]
            assert finished.result.to_json()["scaled"] == [str(note.render())[len("scaled "):]]


async def test_escape_stops_a_running_experiment_and_saves_nothing(sim_url, tmp_path):
    seen = []
    app = PhasetopApp(settings(tmp_path / "runs"), sim_url, None, CEILING)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: seen_of(seen, SessionIdentified), what="server identified")
        await pilot.press("g")  # context growth: one long generation, far from done when escape comes
        await wait_for(pilot, lambda: shows(app, ExperimentScreen), 5, "experiment screen")
        [worker] = [w for w in app.workers if w.group == "experiment"]
        await pilot.press("escape")
        await wait_for(pilot, lambda: shows(app, MainScreen), 5, "back on the main screen")
        await wait_for(pilot, lambda: worker.is_finished, 30, "the experiment's thread ended")
        assert worker.state == WorkerState.CANCELLED
        assert not seen_of(seen, ExperimentFinished)
    assert not [r for r in saved_runs(tmp_path / "runs") if r["kind"] == "sweep"]


async def test_restart_with_another_batch_budget_opens_a_session_and_compares(tmp_path):
    """Send, restart the simulator on the same port with another --max-num-batched-tokens, send, press b."""
    seen = []
    runs_dir = tmp_path / "runs"
    first = SimulatorProcess.start(["--max-num-batched-tokens", "2048"])
    port = str(urlsplit(first.url).port)
    app = PhasetopApp(settings(runs_dir), first.url, None, CEILING)
    try:
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: seen_of(seen, SessionIdentified), what="first session identified")
            await pilot.press("b")  # no session before this one yet: b does nothing
            await pilot.pause(0.1)
            assert app.screen is screen
            await pilot.press("2")
            await wait_for(pilot, lambda: len(seen_of(seen, RequestCompleted)) == 1, what="long prompt before")
            first.stop()
            second = SimulatorProcess.start(["--max-num-batched-tokens", "256", "--port", port])
            try:
                assert second.url == first.url
                await wait_for(pilot, lambda: any(m.number == 2 for m in seen_of(seen, SessionIdentified)), 90,
                               "restart seen and the new session identified")
                assert screen.has_before
                await pilot.press("2")
                await wait_for(pilot, lambda: len(seen_of(seen, RequestCompleted)) == 2, what="long prompt after")
            finally:
                second.stop()
            before, after = (m.timing for m in sorted(seen_of(seen, RequestCompleted), key=lambda m: m.request_id))
            assert before.ok and after.ok
            assert before.burst is None and after.burst is None, (before.burst, after.burst)
            await pilot.press("b")
            await wait_for(pilot, lambda: shows(app, CompareScreen), 5, "compare view")
            compare = app.screen
            config = text_of(compare, "#compare-config")
            assert "server config changed:" in config
            assert "max_num_batched_tokens  2048 → 256" in config
            assert "a different server process" in text_of(compare, "#compare-runs")
            table = compare.query_one("#compare-figures", DataTable)
            figures = {str(table.get_row_at(i)[0]): [str(c) for c in table.get_row_at(i)[1:]] for i in range(table.row_count)}
            assert figures["TTFT p50"][:2] == [f"{before.ttft_s * 1e3:,.2f} ms", f"{after.ttft_s * 1e3:,.2f} ms"]
            assert figures["ITL p50"][:2] == [f"{summarize(t.itl_s).p50 * 1e3:,.2f} ms" for t in (before, after)]
            assert "decode p50" in figures and "decode ÷ ceiling" in figures
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is screen, 5, "back")
    finally:
        first.stop()
    # Session 1 was saved when the restart closed it; session 2 when the app closed.
    sessions = [r for r in saved_runs(runs_dir) if r["params"].get("source") == "ui session"]
    assert [(r["kind"], r["result"]["session"]) for r in sorted(sessions, key=lambda r: r["result"]["session"])] == [("ui", 1), ("ui", 2)]
    flags = {r["result"]["session"]: r["server"]["simulator_flags"]["max_num_batched_tokens"] for r in sessions}
    assert flags == {1: "2048", 2: "256"}
    assert all(r["params"]["sent"] == {"long 2000": {"sends": 1, "concurrency": 1, "prompt_tokens": 2000,
                                                     "max_tokens": 128}} for r in sessions), "each session's workload"


async def probe_run(capsys, url: str, prompt_tokens: int) -> str:
    """`phasetop probe`, which saves its run; in a thread, since it runs its own event loop. 32 tokens an answer: on a
    busy box a starved meter can pause over most of an 8-token answer's 7 gaps, and rightly keep it out of TTFT."""
    code = await asyncio.to_thread(phasetop, ["probe", "--url", url, "--prompt-tokens", str(prompt_tokens), "--max-tokens", "32", "--repeat", "2", "--json"])
    _, err = capsys.readouterr()
    assert code == 0, err
    return err.split("saved run ")[1].strip()


async def test_runs_view_lists_saved_runs_and_compares_two(sim_url, tmp_path, monkeypatch, capsys):
    runs_dir = tmp_path / "runs"
    monkeypatch.setenv("PHASETOP_RUNS_DIR", str(runs_dir))
    monkeypatch.chdir(tmp_path)
    short, long = await probe_run(capsys, sim_url, 300), await probe_run(capsys, sim_url, 1500)
    app = PhasetopApp(settings(runs_dir), "http://127.0.0.1:9", None, None)  # the runs view needs no server
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("r")
        await wait_for(pilot, lambda: shows(app, RunsScreen), 5, "runs view")
        runs = app.screen
        table = runs.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 2, 10, "two runs listed")
        listed = [str(table.get_row_at(i)[1]) for i in range(2)]
        assert sorted(listed) == sorted([short, long])  # two probes in one second list in id order
        assert all(str(table.get_row_at(i)[2]) == "probe" for i in range(2))
        await pilot.press("enter")  # nothing picked: a warning, no compare
        await pilot.pause(0.2)
        assert app.screen is runs
        await pilot.press("down", "space", "up", "space")  # picked in either order, the older run is "before"
        assert runs.picked == [listed[1], listed[0]]
        assert [str(table.get_row_at(i)[0]) for i in range(2)] == ["2", "1"]
        await pilot.press("enter")
        await wait_for(pilot, lambda: shows(app, CompareScreen), 10, "compare view")
        compare = app.screen
        assert "workload changed:" in text_of(compare, "#compare-config")
        assert "prompt_tokens  300 → 1500" in text_of(compare, "#compare-config")
        assert "server config: no change seen" in text_of(compare, "#compare-config")
        expected = compare_runs(*(json.loads((runs_dir / f"{i}.json").read_text()) for i in (short, long)))
        ttft = next(f for f in expected["figures"] if f["label"] == "TTFT p50")
        grid = compare.query_one("#compare-figures", DataTable)
        row = next(grid.get_row_at(i) for i in range(grid.row_count) if str(grid.get_row_at(i)[0]) == "TTFT p50")
        assert [str(c) for c in row[1:3]] == [f"{ttft['before'] * 1e3:,.2f} ms", f"{ttft['after'] * 1e3:,.2f} ms"]
        assert ttft["after"] > ttft["before"]  # a 1,500-token prompt prefills longer than a 300-token one
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is runs, 5, "back to the runs")


async def test_runs_view_shows_a_run_files_text_as_plain_text(tmp_path):
    """A run file is anyone's text: a start time that reads as markup is shown as it is, not parsed (nor a crash)."""
    runs_dir = tmp_path / "runs"
    run = new_run("probe", {}, {"url": "http://h:8000", "model": "[b]m[/b]"}, [], {}, datetime.now(UTC), datetime.now(UTC))
    run["started"] = "[/oops] 2026"
    save_run(run, runs_dir)
    app = PhasetopApp(settings(runs_dir), "http://127.0.0.1:9", None, None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("r")
        await wait_for(pilot, lambda: shows(app, RunsScreen), 5, "runs view")
        table = app.screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 1, 10, "the run listed")
        await pilot.pause(0.1)
        row = [str(cell) for cell in table.get_row_at(0)]
        assert row[3] == "[/oops] 2026" and row[4] == "[b]m[/b]"


async def test_turning_the_load_dial_up_raises_the_achieved_rate_and_its_requests_stream_on_the_timeline(sim_url, tmp_path):
    seen = []
    runs_dir = tmp_path / "runs"
    app = PhasetopApp(settings(runs_dir), sim_url, None, CEILING)
    async with app.run_test(size=(120, 40), message_hook=seen.append, notifications=True) as pilot:  # toasts drawn
        screen = app.screen
        await wait_for(pilot, lambda: seen_of(seen, SessionIdentified), what="server identified")
        await pilot.press("l")
        await wait_for(pilot, lambda: screen.load_running, 5, "load started")
        # Arrivals are Poisson: at 1 req/s a 5 s window held 11 once on CI (p ≈ 1.4 %), so the slow
        # setting is 0.25 req/s, where even its 99.9th percentile (6 in 5 s) stays far below 8 req/s.
        await pilot.press("minus", "minus", "minus")  # 2 → 0.25 req/s
        assert screen.dial.rate == 0.25
        # recent_rps counts the last 5 s: read it once a full window has passed at this rate.
        await wait_for(pilot, lambda: screen.dial.progress and screen.dial.progress.elapsed_s > 7, 30, "7 s at 0.25 req/s")
        slow = screen.dial.progress.recent_rps
        await pilot.press("plus", "plus", "plus", "plus", "plus")  # 0.25 → 8 req/s
        assert screen.dial.rate == 8.0
        turned = screen.dial.progress.elapsed_s
        await wait_for(pilot, lambda: screen.dial.progress.elapsed_s > turned + 7, 30, "7 s at 8 req/s")
        fast = screen.dial.progress.recent_rps
        assert fast > 3 * max(slow, 0.2), (slow, fast)
        dial = str(screen.query_one("#load-dial").render())
        assert "rate 8 req/s" in dial and "achieved" in dial
        # The load's requests stream on the timeline as lanes of their own (not the session's: they are their run).
        await wait_for(pilot, lambda: any(t.output_tokens for t in screen.timings), 10, "a load lane with tokens")
        labels = [lane.label for lane in screen.lanes]
        assert labels and all(label.startswith("load ") for label in labels), labels
        assert screen.state.lab.sessions.current.requests == []
        await pilot.press("l")
        await wait_for(pilot, lambda: seen_of(seen, LoadStopped), 30, "load stopped")
        [stopped] = seen_of(seen, LoadStopped)
        assert stopped.error is None and stopped.figures["completed"] > 20
        await wait_for(pilot, lambda: saved_runs(runs_dir), 10, "bench run saved")
        await wait_for(pilot, lambda: screen.query(Toast), 10, "the saved-run toast")
        await pilot.pause(0.2)
        dial_region = screen.query_one("#load-dial").region
        assert dial_region.height == 2
        for toast in screen.query(Toast):  # toasts rise above the dial, leaving its lines readable
            assert not toast.region.overlaps(dial_region), (toast.region, dial_region)
    [bench] = saved_runs(runs_dir)
    assert bench["kind"] == "bench" and bench["params"]["request_rate"] == 8.0
    assert bench["result"]["completed"] == len([r for r in bench["requests"] if r["ok"]])


async def test_the_load_dials_run_is_judged_against_the_decode_ceiling_as_bench_judges_it(sim_url, tmp_path):
    """A ceiling given at a tenth of what the simulator decodes: every request of the dial's load beats it, so the
    dial's medians leave them out while it runs and the saved run marks them, as `phasetop bench` would."""
    seen = []
    runs_dir = tmp_path / "runs"
    low = (CEILING[0] / 10, *CEILING[1:])
    app = PhasetopApp(settings(runs_dir), sim_url, None, low)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: seen_of(seen, SessionIdentified), what="server identified")
        await pilot.press("l")
        await wait_for(pilot, lambda: any(m.bursts for m in seen_of(seen, LoadProgressed)), 30, "a flagged request")
        await pilot.press("l")
        await wait_for(pilot, lambda: seen_of(seen, LoadStopped), 30, "load stopped")
        await wait_for(pilot, lambda: saved_runs(runs_dir), 10, "bench run saved")
    [bench] = saved_runs(runs_dir)
    done = [r for r in bench["requests"] if r["ok"] and len(r["token_offsets_s"]) > 5]
    assert done and all(r["burst"] and "above the bandwidth ceiling" in r["burst"] for r in done), [r["burst"] for r in done]


async def test_lab_keys_are_in_help_and_palette_and_idle_ones_say_why_not(tmp_path):
    app = PhasetopApp(settings(tmp_path / "runs"), "http://127.0.0.1:9", None, None)  # nothing listens
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        titles = {c.title for c in app.get_system_commands(screen)}
        assert {"Runs", "Load", "Compare with before", "Load rate up", "Sweep: prompt length", "Sweep: prefix cache",
                "Sweep: concurrency", "Sweep: long-prompt interference", "Sweep: context growth"} <= titles
        # No load, no session before, no server: the dial's keys and b are disabled and say why; l and p warn.
        await pilot.press("plus", "right_square_bracket", "b", "l", "p")
        await pilot.pause(0.2)
        assert app.screen is screen and screen.dial is None and not screen.load_running
        said = [n.message for n in app._notifications]
        assert said.count("the load dial is off: press l to start it, then + - ] [ turn it") == 2, said
        assert any(m.startswith("nothing to compare with yet") for m in said), said
        await pilot.press("question_mark")
        await pilot.pause(0.1)
        help_text = str(app.screen.query_one("#help-body Static").render())
        for key, description in (("p", "Sweep: prompt length"), ("b", "Compare with before"), ("+", "Load rate up"),
                                 ("]", "Load concurrency up"), ("r", "Runs")):
            assert any(line.split()[:1] == [key] and description in line for line in help_text.splitlines()), key
        assert "Load rate up (not now)" in help_text and "Runs (not now)" not in help_text


async def test_no_save_keeps_the_runs_dir_empty(sim_url, tmp_path):
    """`phasetop --no-save`: a session with a finished request, closed by quitting, writes no run."""
    runs_dir = tmp_path / "runs"
    seen = []
    app = PhasetopApp(settings(runs_dir), sim_url, None, CEILING, save_runs=False)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: seen_of(seen, SessionIdentified), what="server identified")
        await pilot.press("1")
        await wait_for(pilot, lambda: seen_of(seen, RequestCompleted), 60, "request finished")
        await pilot.pause(1.5)  # past the one-second save delay of a session
    assert not runs_dir.exists() or not list(runs_dir.iterdir())
