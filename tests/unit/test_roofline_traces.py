"""An experiment's rows on the roofline, and decode at 8 bit beside 16, against figures worked out by hand for the
8B layout on an H100 SXM (989 TFLOP/s, 3,350 GB/s: ridge 295.2 FLOP/byte) with prefill chunks of 2,048 tokens."""

import pytest

from tui.core.hardware.devices import find_device
from tui.core.hardware.models import MODELS
from tui.core.hardware.roofline import DECODE, PREFILL, PROJECTED, decode_point, device_roofs
from tui.core.hardware.roofline_target import RooflineTarget
from tui.core.hardware.roofline_traces import (
    NOT_TOGETHER,
    concurrency_point,
    experiment_trace,
    narrower_decode,
    narrower_reading,
    prompt_length_point,
    ridge_batch,
)

H100 = device_roofs(find_device("H100"))
TARGET = RooflineTarget(H100, MODELS["8b"], 16, 2048, "simulator flags", "simulator flags")
ATTENTION = 4 * 32 * 4096  # attention FLOPs per token per token of context seen
KV = 131_072  # KV bytes a token: 2 × 32 layers × 8 heads × 128 × 2 bytes


def test_a_concurrency_row_is_decode_at_a_batch_of_its_streams():
    row = {"streams": 8, "aggregate_tok_s": 1300.0, "batch_decode_tok_s": 1600.0, "context_tokens": 232.0}
    point = concurrency_point(TARGET, row).point
    flops = 8 * (16e9 + ATTENTION * 232.5)  # 128,975,175,680: 8 tokens, each seeing 232 before it and half itself
    read = 16e9 + 8 * KV * 232  # 16,243,269,632: the weights once, each sequence's KV
    assert point.phase == DECODE and point.batch == 8 and point.context == 232
    assert point.intensity_flop_per_byte == pytest.approx(128_975_175_680 / 16_243_269_632)  # 7.94
    assert point.achieved_flops == pytest.approx(flops * 1600 / 8)  # the batch's rate, not the aggregate's
    assert point.roof_share == pytest.approx(200 * read / 3350e9)  # 97.0 % of the bandwidth roof
    assert point.bound == "bandwidth"


def test_a_row_whose_streams_never_decoded_together_has_no_point_and_says_why():
    placed = concurrency_point(TARGET, {"streams": 64, "batch_decode_tok_s": None, "context_tokens": 300.0})
    assert placed.point is None and placed.reason == NOT_TOGETHER
    assert placed.to_json()["intensity_flop_per_byte"] is None and placed.to_json()["reason"] == NOT_TOGETHER


def test_a_prompt_length_row_is_prefill_at_its_prompt_in_chunks_of_the_servers_budget():
    one_pass = prompt_length_point(TARGET, {"prompt_tokens": 2000, "ttft_s": 0.07, "prefill_tok_s": 2000 / 0.0676})
    flops = 2 * 8e9 * 2000 + ATTENTION * 2000 * 1000  # 33,048,576,000,000
    assert one_pass.point.intensity_flop_per_byte == pytest.approx(33_048_576e6 / 16e9)  # 2,065.5: one read of 16 GB
    assert one_pass.point.achieved_flops == pytest.approx(flops / 0.0676)
    assert one_pass.point.roof_share == pytest.approx(flops / 0.0676 / 989e12) == pytest.approx(0.4943, abs=1e-4)
    two_passes = prompt_length_point(TARGET, {"prompt_tokens": 4000, "prefill_tok_s": 4000 / 0.14}).point
    # two chunks (2,048 then 1,952): the weights read twice, and the second reads the first's KV
    assert two_passes.intensity_flop_per_byte == pytest.approx((64e12 + ATTENTION * 4000 * 2000) / (32e9 + KV * 2048))
    assert two_passes.phase == PREFILL and two_passes.tokens == 4000 and two_passes.bound == "compute"


def test_decode_meets_the_compute_roof_at_the_batch_the_ridge_gives():
    batch = ridge_batch(TARGET, 232)
    ridge = 989e12 / 3350e9
    assert batch == pytest.approx(ridge * 16e9 / (16e9 + ATTENTION * 232.5 - ridge * KV * 232))  # 661
    assert batch == pytest.approx(661.15, abs=0.01)
    at_ridge = decode_point(H100, MODELS["8b"], 8e9, 16e9, batch, 232, decode_tok_s=1)
    assert at_ridge.intensity_flop_per_byte == pytest.approx(ridge)
    # at a long context a sequence's FLOPs over its own KV bytes are under the ridge: no batch reaches it
    assert ridge_batch(TARGET, 100_000) is None


def test_the_concurrency_trace_moves_right_and_reads_where_it_would_meet_the_compute_roof():
    rows = [{"streams": s, "batch_decode_tok_s": s * 200.0, "context_tokens": 232.0} for s in (1, 2, 4, 8)]
    rows.append({"streams": 64, "batch_decode_tok_s": None, "context_tokens": 232.0})
    trace = experiment_trace(TARGET, "concurrency", rows)
    intensities = [p.intensity_flop_per_byte for p in trace.points]
    assert [p.batch for p in trace.points] == [1, 2, 4, 8] and intensities == sorted(intensities)
    assert trace.rows[-1].point is None and trace.rows[-1].value == 64
    assert trace.points[0].roof_share == pytest.approx(200 * (16e9 + KV * 232) / 3350e9)  # 95.7 %
    assert trace.points[-1].roof_share == pytest.approx(200 * (16e9 + 8 * KV * 232) / 3350e9)  # 97.0 %
    assert trace.reading == ("decode moves right with the batch, ×1 → ×8: 1.0 → 7.9 FLOP/byte at 96–97 % of the "
                             "bandwidth roof; ridge near ×661")


def test_a_batch_past_the_ridge_meets_the_compute_roof():
    rows = [{"streams": 256, "batch_decode_tok_s": 256 * 150.0, "context_tokens": 0.0},
            {"streams": 512, "batch_decode_tok_s": 512 * 100.0, "context_tokens": 0.0}]
    trace = experiment_trace(TARGET, "concurrency", rows)
    assert [p.bound for p in trace.points] == ["bandwidth", "compute"]  # 256 and 512 FLOP/byte at no context
    # 38,400 tok/s × 16 GFLOP under 256 × 3,350 GB/s; 51,200 tok/s × 16 GFLOP under 989 TFLOP/s
    assert [round(p.roof_share * 100) for p in trace.points] == [72, 83]
    assert trace.reading.endswith("at 72–83 % of the roof above each; at the compute roof from ×512")


def test_the_prompt_length_trace_stays_at_the_compute_roof_while_ttft_grows():
    rows = [{"prompt_tokens": tokens, "ttft_s": s, "prefill_tok_s": tokens / s}
            for tokens, s in ((200, 0.0066), (1000, 0.0334), (2000, 0.0676))]
    trace = experiment_trace(TARGET, "prompt-tokens", rows)
    # 200 tokens: 3.21e12 FLOPs over 16 GB, 200.7 FLOP/byte, under the ridge
    assert trace.points[0].intensity_flop_per_byte == pytest.approx((3.2e12 + ATTENTION * 200 * 100) / 16e9)
    assert [p.bound for p in trace.points] == ["bandwidth", "compute", "compute"]
    assert trace.reading == ("prefill at the compute roof from 1,000 to 2,000 tokens (49 %, MFU) while TTFT grows "
                             "33 → 68 ms; 200 under the ridge")


def test_only_the_two_experiments_have_a_trace():
    assert experiment_trace(TARGET, "prefix", [{"prefix_tokens": 1000}]) is None


def test_decode_at_8_bit_reads_half_the_weights_so_its_point_moves_right_and_its_roof_rises():
    measured = decode_point(H100, MODELS["8b"], 8e9, 16e9, 8, 1000, decode_tok_s=1000)
    ghost = narrower_decode(TARGET, measured)
    flops = 8 * (16e9 + ATTENTION * 1000.5)  # the same FLOPs: 132,196,401,152
    read_16, read_8 = 16e9 + 8 * KV * 1000, 8e9 + 8 * KV * 1000  # 17,048,576,000 and 9,048,576,000
    assert ghost.source == PROJECTED and ghost.batch == 8 and ghost.context == 1000
    assert ghost.intensity_flop_per_byte == pytest.approx(flops / read_8)  # 14.6, from 7.75
    assert ghost.roof_flops == pytest.approx(flops / read_8 * 3350e9)
    assert measured.roof_share == pytest.approx(1000 / 8 * read_16 / 3350e9)  # 63.6 % of the bandwidth roof
    assert ghost.roof_share == pytest.approx(measured.roof_share)
    assert ghost.achieved_flops / measured.achieved_flops == pytest.approx(read_16 / read_8)  # ×1.88: the KV stays
    assert narrower_reading(TARGET, measured, ghost) == (
        "8 bit, projected at the same 64 %: 14.6 FLOP/byte, a roof ×1.88 higher: decode ×1.88 as fast at batch 8")


def test_no_ghost_without_a_decode_point_or_a_narrower_width():
    measured = decode_point(H100, MODELS["8b"], 8e9, 16e9, 1, 0, decode_tok_s=200)
    four_bit = RooflineTarget(H100, MODELS["8b"], 4, None, "simulator flags", "simulator flags")
    assert narrower_decode(TARGET, None) is None and narrower_decode(four_bit, measured) is None
    eight_bit = RooflineTarget(H100, MODELS["8b"], 8, None, "simulator flags", "simulator flags")
    assert narrower_decode(eight_bit, measured).intensity_flop_per_byte == pytest.approx(
        (16e9 + ATTENTION * 0.5) / 4e9)  # 8 → 4 bit: 4 GB of weights
