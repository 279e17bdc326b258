"""`phasetop sweep` against the simulator's reference preset (H100 SXM, 8B at 16 bit): each finding is the seed's claim.

Physics behind each margin (the seed: domain/prefill-vs-decode.md): TTFT 200 → 2,000 tokens is
×10.2 in the simulator, ×9 or so measured; decode moves 1.5 %; a cached 2,000-token prefix cuts
TTFT to about a tenth; 8 streams give ×7 the tokens for the same step time; a 4,000-token prefill
stalls running streams ×13; 4,000 more tokens of context make a step 3.3 % longer. Each assertion
asks for a fraction of that, so a loaded 2-core machine still passes; the TTFT ratios run on a
simulator slowed ×2, as tests/sim/test_claims.py does.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from testbeds.scripted_server import Script, ScriptedServer
from tests.cli.running import assert_one_clear_line
from tui.cli.main import main
from tui.core.experiments.columns import COLUMNS
from tui.core.experiments.plans import INTERFERENCE_STREAMS, make_plan
from tui.core.view.timeline import lanes
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sources.detect import describe_server
from tui.sources.workloads.experiments import run_experiment
from tui.sources.http import make_client

SLOWED = ("--time-scale", "2")
"""For the ratio claims: the physics' ratios do not move, a busy machine's wake-up delays matter half as much."""


@pytest.fixture(scope="module")
def sim():
    with SimulatorProcess.start() as process:
        yield process


@pytest.fixture(scope="module")
def slowed():
    with SimulatorProcess.start(list(SLOWED)) as process:
        yield process


@pytest.fixture(autouse=True)
def clean_settings(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    for name in ("PHASETOP_API_KEY", "PHASETOP_URL", "PHASETOP_RUNS_DIR"):
        monkeypatch.delenv(name, raising=False)


def sweep(capsys, url: str, *args: str) -> tuple[int, dict, str]:
    code = main(["sweep", "--url", url, *args, "--json", "--no-save"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return code, json.loads(out), err


def number(pattern: str, text: str) -> float:
    match = re.search(pattern, text)
    assert match, text
    return float(match.group(1).replace("−", "-").replace(",", ""))


@pytest.mark.timing
def test_prompt_length_ttft_climbs_about_tenfold_while_decode_stays(slowed, capsys):
    _, document, err = sweep(capsys, slowed.url, "--vary", "prompt-tokens", "--values", "200,2000", "--repeat", "3", "--max-tokens", "32")
    assert document["server"]["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert document["vary"] == "prompt-tokens"
    assert [row["prompt_tokens"] for row in document["rows"]] == [200, 2000]
    assert all(row["n"] == 3 for row in document["rows"])
    line = document["finding"]
    assert 6 <= number(r"TTFT ×([\d.]+) from 200 to 2,000 tokens", line) <= 13, line
    assert abs(number(r"decode ([−+][\d.]+) %", line)) < 5, line
    assert "sweep prompt-tokens [" in err and "2,000-token prompt, 3 of 3" in err  # progress, on stderr


@pytest.mark.timing
@pytest.mark.parametrize("caching", [True, False])
def test_a_prefix_sent_twice_is_much_faster_the_second_time_only_with_prefix_caching(slowed, capsys, caching):
    if caching:
        _, document, _ = sweep(capsys, slowed.url, "--vary", "prefix", "--values", "2000", "--repeat", "2")
    else:
        with SimulatorProcess.start([*SLOWED, "--no-enable-prefix-caching"]) as plain:
            _, document, _ = sweep(capsys, plain.url, "--vary", "prefix", "--values", "2000", "--repeat", "2")
    row, line = document["rows"][0], document["finding"]
    ratio = number(r"TTFT ×([\d.]+)", line)
    if caching:
        assert ratio < 0.3 and "prefix-cache hit; a unique prompt" in line, line
        assert row["second_ttft_s"] < 0.3 * row["unique_ttft_s"], row
    else:
        assert 0.7 < ratio < 1.4 and "no prefix-cache hit" in line, line


@pytest.mark.timing
def test_concurrency_multiplies_throughput_while_the_tail_grows_much_less(sim, capsys):
    _, document, _ = sweep(capsys, sim.url, "--vary", "concurrency", "--values", "1,2,4,8")
    rows = {row["streams"]: row for row in document["rows"]}
    assert sorted(rows) == [1, 2, 4, 8] and rows[8]["n"] + rows[8]["bursts"] == 8
    line = document["finding"]
    assert number(r"aggregate ×([\d.]+) from 1 to 8 streams", line) >= 5, line
    assert number(r"p99 ITL ×([\d.]+)", line) < 4, line  # linear would be ×8
    assert rows[8]["aggregate_tok_s"] > rows[2]["aggregate_tok_s"] > rows[1]["aggregate_tok_s"], rows


@pytest.mark.timing
def test_a_long_prompt_landing_stalls_the_running_streams(sim, capsys):
    _, document, _ = sweep(capsys, sim.url, "--vary", "interference", "--values", "4000")
    row, line = document["rows"][0], document["finding"]
    assert row["streams"] == 8 and row["gaps_during"] >= 1
    assert 0 < row["prefill_start_s"] < row["prefill_end_s"] < row["streams_end_s"], row
    assert number(r"ITL ×([\d.]+) while a 4,000-token prompt prefilled", line) >= 4, line
    assert row["itl_after_s"] < 2 * row["itl_before_s"], row  # and it recovers


@pytest.mark.timing  # the lane's send (wall clock) and the row's prefill start agree to µs only on quiet cores: 0.7 ms apart under load
async def test_the_driver_reports_progress_and_keeps_each_round_for_a_timeline(sim):
    """The API the UI builds on: progress in order, rows as they finish, requests that draw as lanes."""
    seen = []
    async with make_client(sim.url) as client:
        server = await describe_server(client, "openai", None)
        result = await run_experiment(client, server, make_plan("interference", [1000, 3000], 96), seen.append)
    fractions = [p.fraction for p in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert [p.row for p in seen if p.row is not None] == list(result.rows)
    assert len(result.requests) == 2 * (INTERFERENCE_STREAMS + 1)
    last_round = lanes(result.requests[-(INTERFERENCE_STREAMS + 1):], keep=INTERFERENCE_STREAMS + 1)
    intruder = last_round[-1]
    assert len(intruder.token_s) == 1 and intruder.first_token_s > intruder.sent_s
    row = result.rows[-1]  # one round per value: the last round is the last row's
    assert intruder.sent_s == pytest.approx(row["prefill_start_s"])
    assert intruder.first_token_s == pytest.approx(row["prefill_end_s"])
    document = result.to_json()
    assert {k: document[k] for k in ("vary", "rows", "finding", "scaled")} == {
        "vary": "interference", "rows": list(result.rows), "finding": result.finding, "scaled": []}
    (stall,) = document["finding_figures"]  # the worst gap during the prefill against the ITL before it
    assert stall["figure"] == "itl_during_s" and stall["after"] == row["itl_during_s"]
    assert stall["verdict"] == "not_enough_data"  # one round a value


@pytest.mark.timing
def test_itl_rises_with_the_token_position_in_a_long_generation(sim, capsys):
    _, document, err = sweep(capsys, sim.url, "--vary", "context", "--values", "300,4300")
    assert [row["position"] for row in document["rows"]] == [300, 4300]
    assert all(row["n"] == 256 for row in document["rows"])
    line = document["finding"]
    assert number(r"ITL ([−+][\d.]+) % from token 300 to 4,300", line) > 1, line
    assert re.search(r"generation 1 of 1: token [\d,]+ of 4,300", err), err  # every 500 chunks: tokens with no text do not count


@pytest.mark.timing  # its finding needs every request timed as generation: a loaded box times one as delivery
def test_the_run_is_saved_with_its_rows_finding_and_raw_timings(sim, capsys, tmp_path):
    runs = tmp_path / "runs"
    code = main(["sweep", "--url", sim.url, "--vary", "prompt-tokens", "--values", "100,400", "--repeat", "1",
                 "--max-tokens", "8", "--runs-dir", str(runs)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "TTFT ×" in out and "prompt tokens" in out  # the table
    (path,) = runs.glob("*.json")
    run = json.loads(path.read_text())
    assert run["kind"] == "sweep" and f"saved run {run['id']}" in err
    assert run["params"] == {"vary": "prompt-tokens", "values": [100, 400], "max_tokens": 8, "repeat": 1,
                             "api": "openai", "model": "meta-llama/Llama-3.1-8B-Instruct"}
    assert run["result"]["finding"] in out
    assert [r["prompt_tokens"] for r in run["requests"]] == [100, 400]
    assert run["server"]["simulator_flags"]["gpu"] == "NVIDIA H100 SXM"


SMALL = ("--max-model-len", "4096")
"""A server the size of real vLLM's tiny test model: the defaults of prefix, interference and context do not fit."""


@pytest.fixture(scope="module")
def small():
    with SimulatorProcess.start(list(SMALL)) as process:
        yield process


@pytest.fixture(scope="module")
def small_fast():
    """For the context sweep's one long generation; its tokens come too fast to time, which this test does not."""
    with SimulatorProcess.start([*SMALL, "--time-scale", "0.25"]) as process:
        yield process


@pytest.mark.parametrize("vary", ["prompt-tokens", "prefix", "concurrency", "interference", "context"])
def test_every_default_sweep_fits_a_4096_token_server_and_says_what_it_scaled(request, capsys, tmp_path, vary):
    server = request.getfixturevalue("small_fast" if vary == "context" else "small")
    runs = tmp_path / "runs"
    code = main(["sweep", "--url", server.url, "--vary", vary, "--repeat", "1", "--json", "--runs-dir", str(runs)])
    out, err = capsys.readouterr()
    assert code == 0, err
    document = json.loads(out)
    plan = make_plan(vary, max_model_len=4096)
    assert [row[COLUMNS[vary][0].key] for row in document["rows"]] == list(plan.values)
    # Every row measured: as generation (n), or flagged as delivery when this box could not read fast enough.
    assert all(row["n"] + row.get("bursts", 0) >= 1 for row in document["rows"]), document["rows"]
    assert document["scaled"] == list(plan.scaled)
    scaled_lines = [line for line in err.splitlines() if line.startswith(f"sweep {vary}: scaled ")]
    if vary in ("prefix", "interference", "context"):  # their defaults reach 4,000 tokens and beyond
        assert scaled_lines == [f"sweep {vary}: scaled {document['scaled'][0]}"], err
        assert "→ 3,900 to fit max_model_len 4,096" in document["scaled"][0]
    else:  # 2,000 + 64 and 200 + 256 tokens fit as they are
        assert document["scaled"] == [] and scaled_lines == [], err
    [saved] = runs.glob("*.json")
    requests = json.loads(saved.read_text())["requests"]
    assert requests and all(r["ok"] for r in requests)
    assert max(r["prompt_tokens"] + r["output_tokens"] for r in requests) <= 4096


def prompt_tokens_total(url: str) -> float:
    """The simulator's count of prompt tokens it has served (the warm-up's would count too)."""
    text = httpx.get(f"{url}/metrics").text
    return float(re.search(r"^vllm:prompt_tokens_total\{[^}]*\} (\S+)$", text, re.MULTILINE).group(1))


def test_values_given_that_cannot_fit_are_refused_before_any_request(small, capsys, tmp_path):
    runs = tmp_path / "runs"
    served = prompt_tokens_total(small.url)
    code = main(["sweep", "--url", small.url, "--vary", "interference", "--values", "2000,4000", "--json", "--runs-dir", str(runs)])
    out, err = capsys.readouterr()
    assert out == "" and not runs.exists()
    assert prompt_tokens_total(small.url) == served
    assert_one_clear_line(code, err, "long prompt tokens 4,000 cannot fit", "at most 3,967", "max_model_len 4,096")
    assert code == 2


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--values", "200"], 2, ["--vary"]),
        (["--vary", "sideways"], 2, ["unknown experiment"]),
        (["--vary", "prompt-tokens", "--values", "200,lots"], 2, ["bad --values"]),
        (["--vary", "prompt-tokens", "--values", ","], 2, ["--values is empty"]),
        (["--vary", "prompt-tokens", "--values", "0,200"], 2, ["at least 1"]),
        (["--vary", "concurrency", "--values", "1,1000"], 2, ["at most 256"]),
        (["--vary", "context", "--max-tokens", "100"], 2, ["does not apply"]),
        (["--vary", "prefix", "--repeat", "0"], 2, ["repeat"]),
        (["--vary", "prompt-tokens", "--values", "200000"], 2, ["max_model_len"]),
        (["--vary", "prompt-tokens", "--slo-ttft-ms", "100"], 2, ["apply to --vary disaggregation only"]),
    ],
)
def test_bad_input_is_one_line_and_a_usage_exit(sim, capsys, args, code, words):
    exit_code = main(["sweep", "--url", sim.url, *args, "--json"])
    out, err = capsys.readouterr()
    assert exit_code == code
    assert out == ""
    assert_one_clear_line(exit_code, err, *words)


@pytest.mark.parametrize(("slos", "words"), [(["--slo-ttft-ms", "100"], ["together"]),
                                             (["--slo-ttft-ms", "100", "--slo-itl-ms", "0"], ["above 0"])])
def test_disaggregation_slos_come_in_pairs_above_zero(capsys, slos, words):
    exit_code = main(["sweep", "--vary", "disaggregation", *slos, "--json"])
    out, err = capsys.readouterr()
    assert exit_code == 2 and out == ""
    assert_one_clear_line(exit_code, err, *words)


@pytest.mark.parametrize(("url", "code", "words"), [("localhost:8000", 2, ["bad URL"]), (None, 1, ["cannot connect"])])
def test_unreachable_or_bad_url_is_one_line(capsys, url, code, words):
    exit_code = main(["sweep", "--url", url or closed_port_url(), "--vary", "prompt-tokens", "--json"])
    out, err = capsys.readouterr()
    assert exit_code == code and out == ""
    assert_one_clear_line(exit_code, err, *words)


def test_a_sweep_cut_short_saves_the_rows_it_finished(capsys, tmp_path):
    # Request 1 is the warm-up, 2 the 10-token row; the 20-token request is refused.
    server = ScriptedServer(Script(fault="status", fault_from_request=3)).start()
    runs = tmp_path / "runs"
    try:
        code = main(["sweep", "--url", server.url, "--vary", "prompt-tokens", "--values", "10,20", "--repeat", "1",
                     "--max-tokens", "4", "--json", "--runs-dir", str(runs)])
    finally:
        server.stop()
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in err
    assert [row["prompt_tokens"] for row in json.loads(out)["rows"]] == [10]
    (path,) = runs.glob("*.json")
    run = json.loads(path.read_text())
    assert [row["prompt_tokens"] for row in run["result"]["rows"]] == [10]
    assert [r["ok"] for r in run["requests"]] == [True, False]


def test_ctrl_c_ends_the_sweep_after_its_row_and_keeps_the_rows(sim, tmp_path):
    """The first Ctrl-C lets the row under way finish; the rows so far are printed and saved, exit 130."""
    env = {**os.environ, "PHASETOP_RUNS_DIR": str(tmp_path / "runs")}
    process = subprocess.Popen(
        [sys.executable, "-m", "tui", "sweep", "--url", sim.url, "--vary", "prompt-tokens",
         "--values", ",".join(str(100 * n) for n in range(1, 31)), "--max-tokens", "8", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    deadline = time.monotonic() + 60
    while (line := process.stderr.readline()) and "prompt tokens 100," not in line and time.monotonic() < deadline:
        pass  # until the first row is done
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    document = json.loads(out)
    assert 1 <= len(document["rows"]) < 30
    assert [row["prompt_tokens"] for row in document["rows"]] == [100 * n for n in range(1, len(document["rows"]) + 1)]
    assert "Traceback" not in err and "stopping after the row under way" in err
    assert err.strip().splitlines()[-1] == "phasetop sweep: interrupted"
    [saved] = (tmp_path / "runs").glob("*-sweep-*.json")
    assert len(json.loads(saved.read_text())["result"]["rows"]) == len(document["rows"])
