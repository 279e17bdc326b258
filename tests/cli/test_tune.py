"""`phasetop tune` with the simulator as the served command: one start per setting, the same load on each,
the best by the objective, a run saved per setting, a bad flag or a server that never gets healthy as a row
with its reason, and no process left behind."""

from __future__ import annotations

import json
import shlex
import sys

import psutil
import pytest

from tests.loopback import free_port
from tui.cli.main import main
from tui.runs_store import list_runs, load_run

pytestmark = pytest.mark.usefixtures("isolated")

WORKLOAD = ["--num-prompts", "8", "--max-concurrency", "8", "--prompt-tokens", "2000", "--max-tokens", "48"]


def sim_command(port: int, time_scale: int = 4) -> str:
    """The simulator 4× slower than the H100: a long prompt's stall (about 280 ms in one step) stands far above
    what a loaded 2-core box adds to a gap."""
    return shlex.join([sys.executable, "-m", "tui", "sim", "--port", str(port), "--time-scale", str(time_scale)])


def tune(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["tune", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest.fixture(autouse=True)
def no_new_children():
    """Every server a test's tune started is stopped by its end (the test's own, or other modules', excepted)."""
    before = children()
    yield
    assert not children() - before, "a server phasetop started is still running"


def test_three_values_give_three_rows_and_the_best_by_the_objective(capsys, tmp_path):
    code, out, err = tune(capsys, "--serve", sim_command(free_port()), "--vary", "max-num-batched-tokens=256,1024,2048",
                          *WORKLOAD, "--json")
    assert code == 0, err
    document = json.loads(out)
    rows = document["rows"]
    assert [row["settings"] for row in rows] == [{"max-num-batched-tokens": v} for v in ("256", "1024", "2048")]
    assert all(row["error"] is None and row["figures"]["completed"] == 8 * row["rounds"] for row in rows)
    assert rows[0]["command"].endswith("--max-num-batched-tokens 256")
    itl_p99 = [row["figures"]["itl_s"]["p99"] for row in rows]
    assert document["optimize"] == "itl-p99" and itl_p99[document["best"]] == min(itl_p99)
    verdict = document["verdict"]
    assert verdict["leader"] == document["best"] and verdict["runner_up"] == sorted(range(3), key=itl_p99.__getitem__)[1]
    assert verdict["stopped"] in ("separated", "tie", "budget spent") and verdict["level"] == 0.99
    # Repeats (one round each of the two leaders at the default budget, twice --num-prompts) only while not settled.
    assert [row["rounds"] for row in rows].count(1) >= 1 and verdict["repeats"] == max(row["rounds"] for row in rows) - 1
    # The physics the loop exists to show: a 2,000-token prompt in one step stalls the other streams;
    # cut into 256-token chunks, it does not.
    assert itl_p99[0] < itl_p99[2] / 2
    # Every round is saved as a run, the repeats too, each under its setting.
    runs = {header["id"]: load_run(header["id"], tmp_path / "runs") for header in list_runs(tmp_path / "runs")}
    assert all(len(row["repeat_run_ids"]) == row["rounds"] - 1 for row in rows)
    assert {row["run_id"] for row in rows} | {i for row in rows for i in row["repeat_run_ids"]} == set(runs)
    for row in rows:
        for run_id in (row["run_id"], *row["repeat_run_ids"]):
            assert runs[run_id]["params"]["settings"] == row["settings"]
            # Each round runs on a fresh start: its first request paid the server's cold start, and says so.
            assert [r["cold"] for r in runs[run_id]["requests"]] == [True] + [False] * 7


def test_a_bad_flag_is_a_row_with_the_servers_own_error_and_the_loop_goes_on(capsys):
    code, out, err = tune(capsys, "--serve", sim_command(free_port()), "--vary", "max-num-batched-tokens=bogus,512",
                          *WORKLOAD, "--optimize", "throughput", "--no-save")
    assert code == 0, err
    first, second = out.splitlines()[1:3]
    assert first.startswith("max-num-batched-tokens=bogus") and "not measured" in first
    assert "exited while starting (status 2)" in first and "invalid int value: 'bogus'" in first
    assert second.startswith("max-num-batched-tokens=512") and "◀ best output tok/s" in second


@pytest.mark.timing  # a tie within ±5 %: the other tests' load on the cores widens the interval past it
def test_two_settings_that_change_nothing_are_a_tie_not_a_winner(capsys):
    """max-num-seqs 256 or 512 for 24 requests: the same server. Arrivals spread (Poisson) give many draws."""
    fast_sim = shlex.join([sys.executable, "-m", "tui", "sim", "--port", str(free_port())])
    code, out, err = tune(capsys, "--serve", fast_sim, "--vary", "max-num-seqs=256,512", "--num-prompts", "24",
                          "--request-rate", "20", "--max-concurrency", "24", "--prompt-tokens", "200", "--max-tokens", "64",
                          "--optimize", "itl-p50", "--no-save", "--json")
    assert code == 0, err
    verdict = json.loads(out)["verdict"]
    assert (verdict["verdict"], verdict["stopped"], verdict["separated"]) == ("tie", "tie", False), verdict
    assert -0.05 * 0.005 < verdict["ci_low"] < verdict["ci_high"] < 0.05 * 0.005, "within ±5 % of a 5 ms gap"


def test_a_lead_not_yet_sure_is_said_so_and_zero_budget_runs_no_repeat(capsys):
    code, out, err = tune(capsys, "--serve", sim_command(free_port()), "--vary", "max-num-seqs=256,512", *WORKLOAD,
                          "--optimize", "ttft-p99", "--budget", "0", "--no-save")
    assert code == 0, err
    lines = out.splitlines()
    assert "◀ leads TTFT p99" in out and "◀ best" not in out, "8 requests sent at once are one draw: no winner"
    assert "but not surely: not enough requests after one round each (budget spent, --budget 0 requests)" in lines[-1]
    assert "repeat" not in err


def test_a_server_that_never_gets_healthy_times_out_with_its_log_tail(capsys):
    never = shlex.join([sys.executable, "-c", "import time; print('loading weights', flush=True); time.sleep(60)",
                        "--port", str(free_port())])
    code, out, err = tune(capsys, "--serve", never, "--vary", "x=1", "--start-timeout", "1.5", "--no-save", "--json")
    assert code == 1 and "every start failed" in err
    [row] = json.loads(out)["rows"]
    assert "was not healthy after 2 s: loading weights" in row["error"]


def test_a_port_already_in_use_is_not_mistaken_for_the_servers_health(capsys):
    from tui.sources.servers.simulator_server import SimulatorProcess

    with SimulatorProcess.start() as other:
        port = int(other.url.rsplit(":", 1)[1])
        code, out, err = tune(capsys, "--serve", sim_command(port), "--vary", "max-num-seqs=4", "--no-save")
    assert code == 1 and f"something already listens on http://127.0.0.1:{port}" in out


@pytest.mark.parametrize(("args", "message"), [
    (["--vary", "max-num-batched-tokens"], "is not FLAG=VALUE"),
    (["--vary", "a=1,1"], "listed twice"),
    (["--vary", "a=1", "--vary", "a=2"], "each flag is varied once"),
    (["--vary", "a=1", "--optimize", "goodput"], "needs --slo-ttft-ms or --slo-tpot-ms"),
    (["--vary", "a=1", "--num-prompts", "0"], "must be at least 1"),
])
def test_usage_errors_are_one_line_before_any_start(capsys, args, message):
    code, out, err = tune(capsys, "--serve", sim_command(free_port()), *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.timing  # a sure lead (◀ best) needs quiet cores: under the parallel load it read ◀ leads
def test_an_experiment_as_the_workload_gives_its_figures_and_finding_per_setting(capsys, tmp_path):
    # 2× slower than the H100 is enough on quiet cores (the stall about 145 ms against 35 ms in chunks), at half the wait.
    code, out, err = tune(capsys, "--serve", sim_command(free_port(), 2), "--vary", "max-num-batched-tokens=256,2048",
                          "--workload", "sweep:interference:2000", "--optimize", "worst-gap")
    assert code == 0, err
    lines = out.splitlines()
    first, first_finding, second, second_finding = lines[1:5]
    assert first.startswith("max-num-batched-tokens=256") and "◀ best worst ITL gap" in first
    assert second.startswith("max-num-batched-tokens=2048")
    assert first_finding.lstrip().startswith("↳ ") and second_finding.lstrip().startswith("↳ ")
    runs = [load_run(header["id"], tmp_path / "runs") for header in list_runs(tmp_path / "runs")]
    assert {run["kind"] for run in runs} == {"sweep"} and len(runs) >= 2  # every round is a run, repeats too
    by_setting = {}  # each setting's first round: the one its row's finding is from
    for run in sorted(runs, key=lambda run: run["started"]):
        by_setting.setdefault(run["params"]["settings"]["max-num-batched-tokens"], run)
    assert by_setting["256"]["params"]["workload"] == "sweep:interference:2000"
    assert by_setting["256"]["params"]["vary"] == "interference" and by_setting["256"]["params"]["values"] == [2000]
    during = {value: run["result"]["rows"][0]["itl_during_s"] for value, run in by_setting.items()}
    # The streams' worst gaps while the 2,000-token prompt prefills: in 256-token chunks it never stalls them whole.
    assert during["256"] < during["2048"] / 2, during
    assert by_setting["2048"]["result"]["finding"] in second_finding


@pytest.mark.parametrize(("workload", "message"), [
    ("--budget=soon", "give requests (e.g. 64) or seconds (e.g. 90s)"),
    ("sweep:nope", "give bench, or sweep:WHAT"),
    ("sweep:prompt-tokens:a,b", "whole numbers"),
    ("benchy", "give bench, or sweep:WHAT"),
])
def test_a_workload_or_budget_that_cannot_run_is_a_usage_error(capsys, workload, message):
    with pytest.raises(SystemExit) as exited:
        main(["tune", "--serve", sim_command(free_port()), "--vary", "a=1",
              *([workload] if workload.startswith("--") else ["--workload", workload])])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and message in err and len(err.strip().splitlines()) == 1
