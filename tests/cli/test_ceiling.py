import json
import subprocess
import sys

import pytest

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
