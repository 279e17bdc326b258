"""The roofline's roofs and phase points, against figures worked out by hand for the 8B layout on an H100."""

import pytest

from tui.core.hardware.devices import find_device
from tui.core.hardware.models import MODELS
from tui.core.hardware.roofline import (
    DECODE,
    PREFILL,
    Roofs,
    decode_point,
    decode_step_traffic,
    device_roofs,
    estimated_point,
    measured_point,
    prefill_point,
    prefill_traffic,
)

LAYOUT = MODELS["8b"]  # 8e9 params, 32 layers, hidden 4096, 8 KV heads × 128: 131,072 KV bytes a token
WEIGHTS = 16e9  # 16-bit
H100 = device_roofs(find_device("H100"))
ATTENTION = 4 * 32 * 4096  # attention FLOPs per token per token of context seen


def test_h100_roofs_and_ridge():
    assert H100.peak_flops == 989e12 and H100.peak_bytes_per_s == 3350e9
    assert H100.ridge_flop_per_byte == pytest.approx(295.22, abs=0.01)
    assert H100.roof_flops(1.0) == 3350e9  # under the ridge: the bandwidth slope
    assert H100.roof_flops(1000) == 989e12  # past it: the flat compute roof
    assert H100.bound(295) == "bandwidth" and H100.bound(296) == "compute"


def test_a_slowed_simulator_has_roofs_that_much_lower_and_the_same_ridge():
    slow = device_roofs(find_device("H100"), time_scale=4)
    assert slow.peak_flops == 989e12 / 4 and slow.peak_bytes_per_s == 3350e9 / 4
    assert slow.ridge_flop_per_byte == pytest.approx(H100.ridge_flop_per_byte)
    assert slow.device == "NVIDIA H100 SXM (4× slower)"


def test_decode_at_batch_1_at_the_ceiling_is_the_whole_bandwidth_roof():
    point = decode_point(H100, LAYOUT, 8e9, WEIGHTS, batch=1, context=0, decode_tok_s=3350 / 16)
    flops = 2 * 8e9 + ATTENTION * 0.5  # one token, seeing half of itself
    assert point.intensity_flop_per_byte == pytest.approx(flops / 16e9)  # ≈ 1 FLOP a byte
    assert point.achieved_flops == pytest.approx(3350 / 16 * flops)
    assert point.bound == "bandwidth" and point.roof_share == pytest.approx(1.0)
    assert point.phase == DECODE and point.source == "model" and point.batch == 1


def test_decode_at_batch_8_reads_each_sequences_kv_once_a_step():
    flops, read = decode_step_traffic(LAYOUT, 8e9, WEIGHTS, batch=8, context=1000)
    assert flops == 8 * (16e9 + ATTENTION * 1000.5)
    assert read == 16e9 + 8 * 131072 * 1000
    point = decode_point(H100, LAYOUT, 8e9, WEIGHTS, batch=8, context=1000, decode_tok_s=1000)
    assert point.intensity_flop_per_byte == pytest.approx(132_196_401_152 / 17_048_576_000)  # 7.75
    assert point.achieved_flops == pytest.approx(1000 * (16e9 + ATTENTION * 1000.5))
    assert point.roof_share == pytest.approx(1000 * 16_524_550_144 / (7.75411 * 3350e9), rel=1e-5)


def test_the_reading_names_the_batch_the_share_and_what_moves_the_point():
    # 41 % of the bandwidth roof at batch 8, context 0: achieved = 0.41 × 8 × 3350 GB/s (intensity ≈ 8).
    tok_s = 0.41 * 3350e9 * (8 * (16e9 + ATTENTION * 0.5) / 16e9) / (16e9 + ATTENTION * 0.5)
    point = decode_point(H100, LAYOUT, 8e9, WEIGHTS, batch=8, context=0, decode_tok_s=tok_s)
    assert point.reading == "decode at batch 8: 41 % of the bandwidth roof; raise the batch to move right"


def test_a_batch_past_the_ridge_is_compute_bound():
    point = decode_point(H100, LAYOUT, 8e9, WEIGHTS, batch=512, context=0, decode_tok_s=20_000)
    assert point.intensity_flop_per_byte == pytest.approx(512, rel=1e-4) and point.bound == "compute"
    assert point.roof_flops == 989e12
    assert point.roof_share == pytest.approx(20_000 * (16e9 + ATTENTION * 0.5) / 989e12)
    assert "past the ridge" in point.reading


def test_prefill_of_2000_tokens_in_one_pass():
    flops = 2 * 8e9 * 2000 + ATTENTION * 2000 * 1000  # 3.2e13 + 1.05e12
    assert prefill_traffic(LAYOUT, 8e9, WEIGHTS, 2000) == (flops, 16e9)
    point = prefill_point(H100, LAYOUT, 8e9, WEIGHTS, prompt_tokens=2000, prefill_s=flops / (0.5 * 989e12))
    assert point.intensity_flop_per_byte == pytest.approx(2065.5, abs=0.1)  # 7× past the ridge
    assert point.bound == "compute" and point.roof_share == pytest.approx(0.5)
    assert point.phase == PREFILL and point.tokens == 2000
    assert point.reading == ("prefill of 2,000 tokens: 50 % of the compute roof (MFU); a longer prompt stays at this "
                             "roof and costs more time")


def test_a_chunked_prefill_reads_the_weights_once_a_chunk_and_the_kv_before_each():
    flops, read = prefill_traffic(LAYOUT, 8e9, WEIGHTS, 5000, chunk_tokens=2048)
    assert read == 3 * 16e9 + 131072 * (0 + 2048 + 4096)
    assert flops == prefill_traffic(LAYOUT, 8e9, WEIGHTS, 5000)[0]  # the chunks' attention adds up to the whole


def test_cached_prompt_tokens_are_not_prefilled_but_are_read():
    point = prefill_point(H100, LAYOUT, 8e9, WEIGHTS, prompt_tokens=2000, prefill_s=0.01, cached_tokens=1500)
    assert point.tokens == 500
    assert point.achieved_flops == pytest.approx((2 * 8e9 * 500 + ATTENTION * 500 * (1500 + 250)) / 0.01)
    assert point.intensity_flop_per_byte == pytest.approx(point.achieved_flops * 0.01 / (16e9 + 131072 * 1500))


def test_a_short_prompt_on_a_high_ridge_device_is_bandwidth_bound():
    point = prefill_point(H100, LAYOUT, 8e9, WEIGHTS, prompt_tokens=100, prefill_s=0.006)
    assert point.intensity_flop_per_byte == pytest.approx(100, rel=0.01) and point.bound == "bandwidth"
    assert point.reading.endswith("too short a prompt to be compute bound")


def test_the_servers_estimate_is_its_flops_over_its_bytes():
    point = estimated_point(H100, DECODE, flops=4e12, read_bytes=2e12, seconds=2.0, batch=2)
    assert point.intensity_flop_per_byte == 2.0 and point.achieved_flops == 2e12
    assert point.roof_share == pytest.approx(2e12 / (2 * 3350e9)) and point.source == "server_estimate"
    assert estimated_point(H100, DECODE, flops=0.0, read_bytes=0.0, seconds=2.0) is None  # the flag is off


def test_a_measured_bandwidth_moves_the_point_not_its_height():
    model = decode_point(H100, LAYOUT, 8e9, WEIGHTS, batch=1, context=0, decode_tok_s=200)
    measured = measured_point(H100, model, measured_bytes_per_s=3.0e12)
    assert measured.achieved_flops == model.achieved_flops and measured.source == "nvml"
    assert measured.intensity_flop_per_byte == pytest.approx(model.achieved_flops / 3.0e12)
    assert measured.roof_share == pytest.approx(3.0e12 / 3350e9)  # under the slope the share is the bandwidth's
    assert measured_point(H100, model, 0.0) is None


def test_json_has_the_spec_fields():
    roofs = Roofs("x", 100e12, 1e12)
    assert roofs.to_json() == {"device": "x", "peak_flops": 100e12, "peak_bytes_per_s": 1e12,
                               "ridge_flop_per_byte": 100.0}
    point = decode_point(roofs, LAYOUT, 8e9, WEIGHTS, batch=1, context=0, decode_tok_s=50).to_json()
    spec = {"intensity_flop_per_byte", "achieved_flops", "roof_flops", "roof_share", "bound", "source", "reading"}
    assert spec <= set(point)
