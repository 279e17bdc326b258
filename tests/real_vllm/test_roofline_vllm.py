"""`phasetop roofline` on the real vLLM server with --enable-mfu-metrics: its own estimate beside phasetop's.

The tiny random-weight Llama on this host's CPU (the CPU row's roofs: 2 TFLOP/s, 90 GB/s, ridge 22 FLOP/byte).
Margins are for a loaded 2-core machine; the estimate and phasetop's model count FLOPs differently (vLLM counts
no FLOPs for the embedding lookup, a large share of a model this small), so only their intensities are held close.
Decodes of 1,024 tokens, not the default 256: on a busy box the client can be starved for a second, and a 256-token
decode then ends between two /metrics readings (no stretch to time, the stream's timing rightly flagged), or the
fourth of four streams joins as the first is nearly done (an honest batch of 3).
"""

from __future__ import annotations

import pytest

from tests.real_vllm.conftest import CLIENT_TIMEOUT_S, phasetop_json, start_vllm
from tui.sources.servers.vllm_server import default_model

pytestmark = pytest.mark.real_vllm
DECODE_TOKENS = "1024"


@pytest.fixture(scope="module")
def mfu_vllm():
    with start_vllm(("--enable-mfu-metrics", "--enable-per-request-metrics")) as server:
        yield server


def roofline(capsys, url: str, *argv: str) -> dict:
    layout = str(default_model() / "config.json")
    code, document, err = phasetop_json(capsys, "roofline", "--url", url, "--layout", layout, "--prompt-tokens", "1000",
                                        "--decode-tokens", DECODE_TOKENS, "--timeout", CLIENT_TIMEOUT_S, *argv)
    assert code == 0, err
    return document


def test_vllms_estimate_lands_beside_phasetops_and_decode_moves_right(capsys, mfu_vllm):
    one = roofline(capsys, mfu_vllm.url)
    assert one["target"]["device_source"] == "CPU row (no GPU seen)" and one["target"]["model_source"] == "--layout"
    prefill, decode = one["prefill"], one["decode"]
    assert prefill["prefill_s_source"] == "the server's own split"  # --enable-per-request-metrics
    assert decode["intensity_flop_per_byte"] is not None, decode["reason"]
    assert prefill["intensity_flop_per_byte"] > one["ridge_flop_per_byte"] > decode["intensity_flop_per_byte"]
    for phase in (prefill, decode):
        assert phase["server_estimate"] is not None, phase["server_estimate_reason"]
        assert phase["server_estimate"]["source"] == "server_estimate"
    assert prefill["server_estimate"]["intensity_flop_per_byte"] > one["ridge_flop_per_byte"]  # vLLM: compute bound too
    assert decode["batch"] == 1 and decode["batch_source"].startswith("vllm:iteration_tokens_total")
    estimate = decode["server_estimate"]["intensity_flop_per_byte"]
    assert estimate == pytest.approx(decode["intensity_flop_per_byte"], rel=0.1)
    four = roofline(capsys, mfu_vllm.url, "--concurrency", "4")["decode"]
    assert four["batch"] == 4, four["reason"] or four["decode_tok_s_source"]  # vLLM's own tokens per step
    assert four["intensity_flop_per_byte"] > 3 * decode["intensity_flop_per_byte"]
    assert four["server_estimate"]["intensity_flop_per_byte"] == pytest.approx(four["intensity_flop_per_byte"], rel=0.1)
