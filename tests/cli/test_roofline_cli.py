"""`phasetop roofline` against real simulators on loopback: the points land where the simulator's physics puts them."""

import json
import subprocess
import sys

import pytest

from testbeds.scripted_server import Reply, Script, ScriptedServer
from tests.cli.running import assert_one_clear_line, run
from tests.loopback import closed_port_url
from tui.core.hardware.devices import find_device
from tui.core.hardware.models import MODELS
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sim.step_cost import EngineConfig, step_time_s, step_traffic

SIM = EngineConfig(find_device("H100 SXM"), MODELS["8b"])
"""The default simulator's engine: its physics is what the points are checked against."""
RIDGE = 989e12 / 3350e9


def roofline(capsys, url, *argv) -> dict:
    code, out, err = run(capsys, "roofline", "--url", url, "--decode-tokens", "128", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def physics(work: list[tuple[int, int]]) -> tuple[float, float]:
    """(intensity, achieved FLOP/s) of one step of `work` in the simulator's own model."""
    traffic = step_traffic(SIM, work)
    return traffic.flops / traffic.read_bytes, traffic.flops / step_time_s(SIM, work)


@pytest.fixture(scope="module")
def sim_url():
    """A default simulator of this module's own: the achieved FLOP/s are checked to a few percent, on a server no
    other module's requests have touched."""
    with SimulatorProcess.start([]) as sim:
        yield sim.url


@pytest.fixture(scope="module")
def doc(sim_url):
    """One roofline of the default simulator at batch 1, run as a shell runs it (once for the module: it takes a
    couple of seconds); stdout holds the JSON document and nothing else."""
    out = subprocess.run([sys.executable, "-m", "tui", "roofline", "--url", sim_url, "--decode-tokens", "128",
                          "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_prefill_sits_past_the_ridge_and_decode_under_it_at_batch_1(doc):
    assert doc["peak_flops"] == 989e12 and doc["peak_bytes_per_s"] == 3350e9
    assert doc["ridge_flop_per_byte"] == pytest.approx(RIDGE)
    prefill, decode = doc["prefill"], doc["decode"]
    assert prefill["intensity_flop_per_byte"] > 5 * RIDGE and prefill["bound"] == "compute"
    assert decode["intensity_flop_per_byte"] < 1.01 and decode["bound"] == "bandwidth"
    assert decode["batch"] == 1 and prefill["tokens"] == 2000
    assert prefill["source"] == decode["source"] == "model"
    assert decode["reading"].startswith("decode at batch 1: ") and "raise the batch to move right" in decode["reading"]


def test_the_intensities_are_the_simulators_own(doc):
    """The bytes and FLOPs a step reads and computes, counted as the simulator counts them to time it."""
    assert doc["prefill"]["intensity_flop_per_byte"] == pytest.approx(physics([(2000, 0)])[0], rel=1e-9)
    context = doc["decode"]["context_tokens"]
    assert 32 < context < 32 + 128  # its prompt plus half its answer, about
    assert doc["decode"]["intensity_flop_per_byte"] == pytest.approx(physics([(1, round(context))])[0], rel=1e-4)


@pytest.mark.timing
def test_the_achieved_flops_are_within_a_few_percent_of_the_simulators_model(doc):
    prefill_flops = physics([(2000, 0)])[1]  # half the compute roof: the simulator's prefill MFU
    assert doc["prefill"]["achieved_flops"] == pytest.approx(prefill_flops, rel=0.05)
    assert doc["prefill"]["roof_share"] == pytest.approx(0.5, rel=0.05)
    decode_flops = physics([(1, round(doc["decode"]["context_tokens"]))])[1]  # just under the bandwidth roof
    assert doc["decode"]["achieved_flops"] == pytest.approx(decode_flops, rel=0.03)
    assert doc["decode"]["roof_share"] > 0.95


def test_decode_moves_right_as_the_batch_grows(capsys, sim_url):
    one = roofline(capsys, sim_url, "--concurrency", "1")["decode"]
    sixteen = roofline(capsys, sim_url, "--concurrency", "16")["decode"]
    assert one["batch"] == 1 and sixteen["batch"] == 16  # the server's own tokens per step
    assert sixteen["batch_source"].startswith("vllm:iteration_tokens_total")
    ratio = sixteen["intensity_flop_per_byte"] / one["intensity_flop_per_byte"]
    assert 14 < ratio < 16  # 16 tokens a weight read, less the KV each sequence reads
    assert sixteen["intensity_flop_per_byte"] < RIDGE  # still under the ridge: bandwidth bound
    context = round(sixteen["context_tokens"])
    assert sixteen["intensity_flop_per_byte"] == pytest.approx(physics([(1, context)] * 16)[0], rel=1e-3)


def test_no_estimates_without_the_flag_and_no_nvml_for_a_simulator(doc):
    for phase in ("prefill", "decode"):
        assert doc[phase]["server_estimate"] is None and "--enable-mfu-metrics" in doc[phase]["server_estimate_reason"]
        assert doc[phase]["measured"] is None and doc[phase]["measured_reason"]


def test_the_servers_estimate_lands_beside_phasetops(capsys):
    with SimulatorProcess.start(["--enable-mfu-metrics"]) as sim:
        doc = roofline(capsys, sim.url, "--concurrency", "4", "--decode-tokens", "256")
        code, text, _ = run(capsys, "roofline", "--url", sim.url)
    for phase in ("prefill", "decode"):
        model, estimate = doc[phase], doc[phase]["server_estimate"]
        assert estimate["source"] == "server_estimate" and doc[phase]["server_estimate_reason"] is None
        assert estimate["intensity_flop_per_byte"] == pytest.approx(model["intensity_flop_per_byte"], rel=0.02)
        assert estimate["achieved_flops"] == pytest.approx(model["achieved_flops"], rel=0.05)
    assert doc["decode"]["server_estimate"]["batch"] == 4
    assert code == 0 and "prefill  server estimate" in text and "decode   server estimate" in text


@pytest.mark.timing  # the streams timed in real time: a loaded box clumps them
def test_a_server_without_metrics_is_timed_by_its_streams(capsys):
    """Ollama has no /metrics: decode from the streams sent together, prefill from its own prompt_eval_duration. (A
    simulator speaking Ollama's API says nothing of its device, as Ollama would not: --gpu names it.)"""
    with SimulatorProcess.start(["--api", "ollama"]) as sim:
        doc = roofline(capsys, sim.url, "--concurrency", "2", "--gpu", "h100")
    assert doc["prefill"]["prefill_s_source"] == "the server's own split"
    decode = doc["decode"]
    assert decode["batch"] == 2 and decode["batch_source"] == "the streams sent together"
    assert decode["decode_tok_s_source"].startswith("timed by the streams themselves")
    assert decode["intensity_flop_per_byte"] < RIDGE < doc["prefill"]["intensity_flop_per_byte"]
    assert decode["server_estimate"] is None
    assert doc["prefill"]["server_estimate_reason"] == "the server has no /metrics"


def test_text_names_the_roofs_and_reads_each_phase(capsys, sim_url):
    code, out, err = run(capsys, "roofline", "--url", sim_url, "--prompt-tokens", "1000")  # 256 decode tokens: two scrapes see it
    assert code == 0 and err == ""
    assert out.startswith("roofline of NVIDIA H100 SXM (simulator flags): compute 989 TFLOP/s, bandwidth 3,350 GB/s, "
                          "ridge 295 FLOP/byte")
    assert "prefill of 1,000 tokens: " in out and "% of the compute roof (MFU)" in out
    assert "decode at batch 1: " in out


def test_an_unknown_model_asks_for_its_layout(capsys):
    server = ScriptedServer(Script(model="tiny")).start()
    try:
        code, _, err = run(capsys, "roofline", "--url", server.url, "--gpu", "h100")
    finally:
        server.stop()
    assert code == 2
    assert_one_clear_line(code, err, "no preset layout matches the model 'tiny'", "--layout")


def test_nothing_listening_is_one_line(capsys):
    code, _, err = run(capsys, "roofline", "--url", closed_port_url())
    assert code == 1
    assert_one_clear_line(code, err, "phasetop roofline:")


@pytest.mark.parametrize("argv, words", [
    (["--concurrency", "0"], ["--concurrency"]),
    (["--decode-tokens", "1"], ["--decode-tokens"]),
    (["--gpu", "voodoo"], ["unknown device"]),
    (["--layout", "/nonexistent/config.json"], ["config.json"]),
    (["--url", "ftp://x"], ["http"]),
])
def test_bad_flags_are_one_line_and_exit_2(capsys, argv, words):
    code, _, err = run(capsys, "roofline", "--url", "http://127.0.0.1:9", *argv)
    assert code == 2
    assert_one_clear_line(code, err, *words)


def test_a_simulators_bit_width_is_its_own(capsys, sim_url):
    code, _, err = run(capsys, "roofline", "--url", sim_url, "--bits", "8")
    assert code == 2
    assert_one_clear_line(code, err, "--bits")


def test_a_decode_too_short_for_two_readings_is_timed_by_its_streams_and_says_so(capsys, sim_url):
    decode = roofline(capsys, sim_url, "--decode-tokens", "8")["decode"]
    assert decode["decode_tok_s_source"].startswith("timed by the streams themselves")
    assert "raise --decode-tokens" in decode["server_estimate_reason"]
    if decode["batch"] is None:  # 8 tokens whose last the meter read a few ms late (a loaded box) time the meter
        assert decode["reason"].startswith("a decode stream timed the delivery, not the generation: "), decode["reason"]
    else:
        assert decode["batch"] == 1 and decode["reason"] is None


def test_a_server_that_refuses_the_prefill_is_one_line(capsys):
    refusing = Script(model="meta-llama/Llama-3.1-8B-Instruct",
                      replies={"/v1/completions": Reply({"error": {"message": "out of memory"}}, status=500)})
    server = ScriptedServer(refusing).start()
    try:
        code, out, err = run(capsys, "roofline", "--url", server.url, "--gpu", "h100", "--json")
    finally:
        server.stop()
    assert out == ""
    assert_one_clear_line(code, err, "prefill request failed", "out of memory")
