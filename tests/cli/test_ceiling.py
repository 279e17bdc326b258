import json
import socket
import subprocess
import sys

import pynvml
import pytest

from testbeds.scripted_server import Script, ScriptedServer
from tests.fixtures.fake_pynvml import FakeGpu, FakeNvml
from tests.fixtures.metrics_server import MetricsServer
from tui.cli.main import main


def run_json(capsys, *argv):
    assert main(["ceiling", *argv, "--json"]) == 0
    out = capsys.readouterr()
    return json.loads(out.out)


def test_no_arguments_prints_the_seed_table_row_for_row(capsys):
    assert main(["ceiling"]) == 0
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if line.startswith(("CPU", "NVIDIA"))]
    assert [int(r.split()[-4]) for r in rows] == [6, 38, 54, 63, 127, 209]
    assert "131,072 B/token" in text


def test_json_is_unrounded(capsys):
    doc = run_json(capsys)
    h100 = doc["rows"][-1]
    assert h100["device"] == "NVIDIA H100 SXM"
    assert h100["decode_ceiling_tok_s"] == pytest.approx(3350 / 16)
    assert h100["kv_bytes_per_token"] == 131072


def test_gpu_bits_context(capsys):
    row = run_json(capsys, "--gpu", "h200", "--bits", "8", "--context", "8000")["rows"][0]
    assert row["device"] == "NVIDIA H200"
    assert row["decode_ceiling_tok_s"] == pytest.approx(4800e9 / (8e9 + 8000 * 131072))
    assert row["kv_bytes_at_context"] == pytest.approx(8000 * 131072)


def test_bandwidth_and_params(capsys):
    row = run_json(capsys, "--bandwidth-gbs", "90", "--params", "8")["rows"][0]
    assert row["decode_ceiling_tok_s"] == pytest.approx(90 / 16)
    assert row["prefill_floor_s"] is None


def test_config_json(capsys, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"hidden_size": 2048, "num_attention_heads": 32, "num_hidden_layers": 16,
                               "num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 128256,
                               "tie_word_embeddings": True}))
    row = run_json(capsys, "--gpu", "H100", "--config", str(cfg))["rows"][0]
    assert row["kv_bytes_per_token"] == 2 * 16 * 8 * 64 * 2
    assert 1.2e9 < row["params"] < 1.3e9


def test_list_has_every_seed_device_and_h200(capsys):
    names = [d["name"] for d in run_json(capsys, "--list")["devices"]]
    assert "NVIDIA H200" in names and "NVIDIA H100 SXM" in names and len(names) >= 7


@pytest.mark.parametrize("argv", [["--gpu", "voodoo"], ["--bandwidth-gbs", "-1"], ["--config", "/nonexistent/config.json"],
                                  ["--model", "nope"], ["--context", "-5"]])
def test_bad_input_is_one_line_and_exit_2(capsys, argv):
    assert main(["ceiling", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("phasetop ceiling:")


def test_subprocess_stdout_is_only_json():
    out = subprocess.run([sys.executable, "-m", "tui", "ceiling", "--json"], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["rows"] and out.stderr == ""


# ---- --url: the ceiling of a running server, derived as the UI derives it (real loopback servers, fake NVML)

H100_NVML = FakeGpu(name="NVIDIA H100 80GB HBM3", max_mem_clock_mhz=2619, bus_width_bits=5120, gpm=False)
GGUF = {"object": "list", "data": [{"id": "some-finetune.gguf", "object": "model",
                                    "meta": {"size": 4_900_000_000, "n_params": 8_030_000_000}}]}


@pytest.fixture
def served_8b():
    """A vLLM stand-in serving the 8B id: not a simulator, so this host's (fake) GPU decides."""
    server = ScriptedServer(Script(model="meta-llama/Llama-3.1-8B-Instruct")).start()
    yield server.url
    server.stop()


def test_a_simulator_by_url_gives_its_own_209(capsys, sim_url, monkeypatch):
    FakeNvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND).install(monkeypatch)  # this host's CPU row must not win
    doc = run_json(capsys, "--url", sim_url + "/v1")
    assert doc["decode_ceiling_tok_s"] == pytest.approx(3350e9 / 16e9) and not doc["cpu_row"]
    assert doc["weight_bytes"] == 16e9 and doc["kv_bytes_per_token"] == 131072
    assert "simulated NVIDIA H100 SXM" in doc["line"] and doc["server"]["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert main(["ceiling", "--url", sim_url]) == 0
    assert "decode ceiling 209 tok/s: 3,350 GB/s ÷ 16,000 MB weights" in capsys.readouterr().out


def test_context_is_counted_where_the_layout_is_known(capsys, sim_url):
    doc = run_json(capsys, "--url", sim_url, "--context", "8000")
    assert doc["decode_ceiling_at_context_tok_s"] == pytest.approx(3350e9 / (16e9 + 8000 * 131072))
    assert main(["ceiling", "--url", sim_url, "--context", "8000"]) == 0
    assert "at 8,000 tokens of context (+1.05 GB of KV cache a step): 196 tok/s" in capsys.readouterr().out


def test_a_real_servers_model_id_on_this_hosts_gpu(capsys, served_8b, monkeypatch):
    FakeNvml([H100_NVML]).install(monkeypatch)
    doc = run_json(capsys, "--url", served_8b)
    assert doc["decode_ceiling_tok_s"] == pytest.approx(3350e9 / 16e9)
    assert "(NVIDIA H100 80GB HBM3; Llama-3.1-8B at 16 bit)" in doc["line"]
    given = run_json(capsys, "--url", served_8b, "--bandwidth-gbs", "4800")
    assert given["decode_ceiling_tok_s"] == pytest.approx(4800e9 / 16e9) and "as given" in given["line"]
    assert run_json(capsys, "--url", served_8b, "--gpu", "a10g")["decode_ceiling_tok_s"] == pytest.approx(600e9 / 16e9)


def test_no_gpu_here_takes_the_cpu_row(capsys, served_8b, monkeypatch):
    FakeNvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND).install(monkeypatch)
    doc = run_json(capsys, "--url", served_8b)
    assert doc["cpu_row"] and doc["decode_ceiling_tok_s"] == pytest.approx(90e9 / 16e9)


def test_a_reported_size_without_a_layout_gives_weights_only_and_refuses_context(capsys, monkeypatch):
    FakeNvml([H100_NVML]).install(monkeypatch)
    with MetricsServer([""], models=GGUF) as server:
        doc = run_json(capsys, "--url", server.url)
        assert doc["weight_bytes"] == 4.9e9 and doc["kv_bytes_per_token"] is None
        assert doc["decode_ceiling_tok_s"] == pytest.approx(3350e9 / 4.9e9)
        assert "the size the server reports" in doc["line"]
        assert main(["ceiling", "--url", server.url, "--context", "4000"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "--context needs the model's layout" in err


def test_an_unknown_model_says_why_and_exits_0(capsys, monkeypatch):
    FakeNvml([H100_NVML]).install(monkeypatch)
    server = ScriptedServer(Script(model="mistralai/Mistral-7B-Instruct-v0.3")).start()
    try:
        doc = run_json(capsys, "--url", server.url, "--context", "4000")
        assert doc["decode_ceiling_tok_s"] is None and doc["decode_ceiling_at_context_tok_s"] is None
        assert doc["line"] == "ceiling: unknown model 'mistralai/Mistral-7B-Instruct-v0.3' (no preset layout matches; not guessed)"
        assert main(["ceiling", "--url", server.url]) == 0
        assert "ceiling: unknown model 'mistralai/Mistral-7B-Instruct-v0.3'" in capsys.readouterr().out
    finally:
        server.stop()


def test_nothing_listening_is_one_line_and_exit_1(capsys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: refused
        assert main(["ceiling", "--url", f"http://127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("phasetop ceiling:")
