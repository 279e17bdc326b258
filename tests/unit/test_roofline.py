import json

import pytest

from tui.core.hardware.devices import seed_table_devices
from tui.core.hardware.models import MODELS, ModelLayout, find_model, params_from_config
from tui.core.hardware.roofline import ceiling, decode_ceiling_tok_s, forward_flops, kv_bytes_per_token, weight_bytes

LLAMA_31_8B_CONFIG = {
    "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False,
    "max_position_embeddings": 131072,
}


def test_seed_table_row_for_row():
    expected = {"CPU, dual channel DDR5-5600": 6, "NVIDIA A10G": 38, "NVIDIA L40S": 54, "NVIDIA RTX 4090": 63,
                "NVIDIA A100 80GB SXM": 127, "NVIDIA H100 SXM": 209}
    layout = MODELS["8b"]
    got = {d.name: round(ceiling(device=d.name, bandwidth_gbs=d.mem_bandwidth_gbs, peak_tflops=None,
                                 layout=layout).decode_ceiling_tok_s)
           for d in seed_table_devices()}
    assert got == expected
    assert [d.name for d in seed_table_devices()] == list(expected)


def test_seed_kv_figures_for_the_8b_layout():
    per_token = kv_bytes_per_token(MODELS["8b"])
    assert per_token == 131072
    assert per_token * 8000 == pytest.approx(1.05e9, rel=0.01)  # "roughly 1 GB at 8,000 tokens"


def test_head_dim_defaults_to_hidden_over_heads_and_can_be_given():
    assert ModelLayout.from_config(LLAMA_31_8B_CONFIG).head_dim == 128
    assert ModelLayout.from_config({**LLAMA_31_8B_CONFIG, "head_dim": 256}).head_dim == 256
    no_gqa = {k: v for k, v in LLAMA_31_8B_CONFIG.items() if k != "num_key_value_heads"}
    assert ModelLayout.from_config(no_gqa).kv_heads == 32


def test_params_from_llama_config():
    assert params_from_config(LLAMA_31_8B_CONFIG) == pytest.approx(8.03e9, rel=0.002)
    tied = params_from_config({**LLAMA_31_8B_CONFIG, "tie_word_embeddings": True})
    assert params_from_config(LLAMA_31_8B_CONFIG) - tied == 128256 * 4096


def test_config_file_round_trip(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_31_8B_CONFIG))
    assert find_model(str(path)).kv_heads == 8


def test_bad_config_is_a_value_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"hidden_size": 10}))
    with pytest.raises(ValueError, match="num_attention_heads"):
        find_model(str(path))
    with pytest.raises(ValueError, match="unknown model"):
        find_model("no-such-model")


def test_quantization_halves_bytes_and_doubles_ceiling():
    assert weight_bytes(8e9, 8) == 8e9 and weight_bytes(8e9, 4) == 4e9
    c16 = ceiling(device="x", bandwidth_gbs=3350, peak_tflops=None, layout=MODELS["8b"], bits=16)
    c8 = ceiling(device="x", bandwidth_gbs=3350, peak_tflops=None, layout=MODELS["8b"], bits=8)
    assert c8.decode_ceiling_tok_s == pytest.approx(2 * c16.decode_ceiling_tok_s)


def test_context_lowers_the_ceiling_by_kv_bytes():
    c = ceiling(device="x", bandwidth_gbs=3350, peak_tflops=None, layout=MODELS["8b"], context=8000)
    assert c.bytes_per_token == 16e9 + 8000 * 131072
    assert c.decode_ceiling_tok_s == pytest.approx(decode_ceiling_tok_s(3350, 16e9 + 8000 * 131072))


def test_prefill_floor_grows_at_least_linearly():
    layout = MODELS["8b"]
    short = forward_flops(layout.params, layout, 200)
    long = forward_flops(layout.params, layout, 2000)
    assert long > 10 * short  # the quadratic attention term adds to the 10x linear part
    assert short == 2 * 8e9 * 200 + 4 * 32 * 4096 * 200 * 100
    c = ceiling(device="H100", bandwidth_gbs=3350, peak_tflops=989, layout=layout, prefill_tokens=2000)
    assert c.prefill_floor_s == pytest.approx(long / 989e12)
