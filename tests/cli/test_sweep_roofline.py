"""`phasetop sweep --json` with each row on the roofline, against the default simulator (H100 SXM, 8B at 16 bit) with
vLLM's per-request metrics on (its own prefill time, as vLLM gives it): the concurrency experiment's decode points move
right with the batch under the bandwidth roof, the prompt-length experiment's prefill points sit at the share of the
compute roof the simulator computes at, where its physics puts them."""

import json
import subprocess
import sys

import pytest

from testbeds.scripted_server import Script, ScriptedServer
from tests.cli.running import run
from tui.core.hardware.devices import find_device
from tui.core.hardware.models import MODELS
from tui.core.hardware.roofline import device_roofs
from tui.core.hardware.roofline_target import RooflineTarget
from tui.core.hardware.roofline_traces import concurrency_point, narrower_decode
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sim.step_cost import COMPUTE_EFFICIENCY, EngineConfig, step_time_s, step_traffic

SIM = EngineConfig(find_device("H100 SXM"), MODELS["8b"])
"""The default simulator's engine: its physics is what the points are checked against."""


def physics(work: list[tuple[int, int]]) -> tuple[float, float]:
    """(intensity, achieved FLOP/s) of one step of `work` in the simulator's own model."""
    traffic = step_traffic(SIM, work)
    return traffic.flops / traffic.read_bytes, traffic.flops / step_time_s(SIM, work)


def sweep(url: str, *argv: str) -> dict:
    """The sweep as a shell runs it (once a module: a few seconds); stdout holds the JSON document and nothing else."""
    out = subprocess.run([sys.executable, "-m", "tui", "sweep", "--url", url, *argv, "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def sim_url():
    with SimulatorProcess.start(["--enable-per-request-metrics"]) as sim:
        yield sim.url


@pytest.fixture(scope="module")
def concurrency(sim_url):
    """Two rounds a row: a round whose streams a busy client read late places nothing, and the row takes the other."""
    return sweep(sim_url, "--vary", "concurrency", "--values", "1,2,4,8", "--max-tokens", "64", "--repeat", "2")


@pytest.fixture(scope="module")
def prompt_length(sim_url):
    """Three rounds a row: a 2-token answer whose last chunk the meter read a few ms late times the meter, not the
    server (it is flagged and left out of its row; on this box about one row in six), and the row takes the others."""
    return sweep(sim_url, "--vary", "prompt-tokens", "--values", "500,1000,2000", "--repeat", "3", "--max-tokens", "2")


def decode_work(row: dict) -> list[tuple[int, int]]:
    """The simulator's step at this row: each stream adds a token after its context (its prompt, half its answer)."""
    return [(1, round(row["context_tokens"]))] * row["streams"]


def test_each_concurrency_row_is_decode_at_its_batch_moving_right(concurrency):
    roofline, rows = concurrency["roofline"], concurrency["rows"]
    assert roofline["peak_flops"] == 989e12 and roofline["peak_bytes_per_s"] == 3350e9 and roofline["reason"] is None
    assert roofline["target"]["device_source"] == "simulator flags" and roofline["target"]["bits"] == 16
    points = [row["roofline"] for row in rows]
    assert [p["batch"] for p in points] == [1, 2, 4, 8] and all(p["bound"] == "bandwidth" for p in points)
    assert all(row["context_tokens"] == pytest.approx(200 + 64 / 2, abs=2) for row in rows)
    for row, point in zip(rows, points):  # the bytes and FLOPs a step reads and computes, as the simulator counts them
        assert point["intensity_flop_per_byte"] == pytest.approx(physics(decode_work(row))[0], rel=1e-4)
    intensities = [p["intensity_flop_per_byte"] for p in points]
    assert intensities == sorted(intensities) and 7.5 < intensities[-1] / intensities[0] < 8
    assert roofline["reading"].startswith("decode moves right with the batch, ×1 → ×8: 1.0 → 7.9 FLOP/byte at ")


@pytest.mark.timing
def test_decode_stays_under_the_bandwidth_roof_within_a_few_percent_of_the_simulators_physics(concurrency):
    for row in concurrency["rows"]:
        point = row["roofline"]
        assert point["achieved_flops"] == pytest.approx(physics(decode_work(row))[1], rel=0.03), row["streams"]
        assert 0.95 < point["roof_share"] <= 1.0
    eight = concurrency["rows"][-1]
    assert eight["aggregate_tok_s"] < 0.95 * eight["batch_decode_tok_s"]  # the send's span holds the prompts' prefill


@pytest.mark.timing
def test_decode_projected_to_8_bit_lands_where_an_8_bit_simulator_measures_it(concurrency):
    """The ghost beside the live point: the 16-bit rows' decode with half the weight bytes, at the same share of the
    (higher) roof, against the same sweep on a simulator serving the model at 8 bit."""
    with SimulatorProcess.start(["--quantization", "fp8"]) as fp8:
        eight_bit = sweep(fp8.url, "--vary", "concurrency", "--values", "1,8", "--max-tokens", "64", "--repeat", "2")
    assert eight_bit["roofline"]["target"]["bits"] == 8
    target = RooflineTarget(device_roofs(find_device("H100 SXM")), MODELS["8b"], 16, 2048, "simulator flags",
                            "simulator flags")
    sixteen = {row["streams"]: row for row in concurrency["rows"]}
    for row in eight_bit["rows"]:
        ghost = narrower_decode(target, concurrency_point(target, sixteen[row["streams"]]).point)
        measured = row["roofline"]
        assert ghost.intensity_flop_per_byte == pytest.approx(measured["intensity_flop_per_byte"], rel=0.01)
        assert ghost.achieved_flops == pytest.approx(measured["achieved_flops"], rel=0.03), row["streams"]
        assert measured["achieved_flops"] > 1.8 * sixteen[row["streams"]]["roofline"]["achieved_flops"]


def test_each_prompt_length_row_is_prefill_past_the_ridge(prompt_length):
    rows = prompt_length["rows"]
    # The rate is the server's own split, not prompt tokens over the client's TTFT. (Their order is not asserted: the
    # split is timed on the server's clock and the TTFT on the client's, and under a loaded make test one row's median
    # split was longer than its median TTFT.)
    assert all(row["prompt_tokens"] / row["prefill_tok_s"] != pytest.approx(row["ttft_s"], rel=1e-6) for row in rows)
    for row in rows:
        point = row["roofline"]
        assert point["tokens"] == row["prompt_tokens"] and point["bound"] == "compute"
        assert point["intensity_flop_per_byte"] == pytest.approx(physics([(row["prompt_tokens"], 0)])[0], rel=1e-9)
    assert prompt_length["roofline"]["reading"].startswith("prefill at the compute roof from 500 to 2,000 tokens (")


@pytest.mark.timing
def test_prefill_sits_at_the_share_of_the_compute_roof_the_simulator_computes_at(prompt_length):
    for row in prompt_length["rows"]:
        tokens, point = row["prompt_tokens"], row["roofline"]
        assert physics([(tokens, 0)])[1] / 989e12 == pytest.approx(COMPUTE_EFFICIENCY, rel=0.01)  # its step, less 40 µs
        assert point["achieved_flops"] == pytest.approx(physics([(tokens, 0)])[1], rel=0.03), tokens
        assert point["roof_share"] == pytest.approx(COMPUTE_EFFICIENCY, rel=0.03), tokens


def test_a_server_of_no_known_model_has_rows_with_no_point_and_the_reason(capsys):
    server = ScriptedServer(Script(model="tiny")).start()
    try:
        code, out, err = run(capsys, "sweep", "--url", server.url, "--vary", "concurrency", "--values", "1",
                             "--max-tokens", "4", "--json")
    finally:
        server.stop()
    assert code == 0, err
    document = json.loads(out)
    [row] = document["rows"]
    assert row["roofline"]["intensity_flop_per_byte"] is None and row["roofline"]["achieved_flops"] is None
    assert "no preset layout matches the model 'tiny'" in row["roofline"]["reason"]
    assert document["roofline"]["reason"] == row["roofline"]["reason"] and document["roofline"]["target"] is None


def test_an_experiment_with_no_trace_has_no_roofline(capsys):
    server = ScriptedServer(Script()).start()
    try:
        code, out, err = run(capsys, "sweep", "--url", server.url, "--vary", "prefix", "--values", "20", "--repeat",
                             "1", "--max-tokens", "1", "--json")
    finally:
        server.stop()
    assert code == 0, err
    document = json.loads(out)
    assert "roofline" not in document and all("roofline" not in row for row in document["rows"])
