"""The roofline screen's state from the timeline's requests and the server's window: only what ran alone is placed."""

import pytest

from tui.core.hardware.devices import find_device
from tui.core.hardware.models import MODELS
from tui.core.telemetry.metric_names import read_scrape
from tui.core.telemetry.promstats import build_snapshot
from tui.core.measure.records import RequestTiming, ServerSplit
from tui.core.hardware.roofline_live import NO_DECODE, NO_PREFILL, figures_lines, live_roofline, live_target
from tui.core.telemetry.readings import GpuReading, MetricsSnapshot, ServerReading
from tui.sim.options import SimOptions
from tui.sim.step_cost import EngineConfig

FLAGS = SimOptions(EngineConfig(find_device("H100"), MODELS["8b"]), "m").sim_info()
TARGET = live_target(FLAGS, None, None, False)
PREFILL_FLOPS = 2 * 8e9 * 2000 + 4 * 32 * 4096 * 2000 * 1000


def request(sent: float, ttft_s: float, tokens: int, itl_s: float = 0.005, prompt: int = 200, done: bool = True,
            split: ServerSplit | None = None) -> RequestTiming:
    offsets = tuple(ttft_s + i * itl_s for i in range(tokens))
    return RequestTiming(ok=True, t_sent_unix=sent, token_offsets_s=offsets, prompt_tokens=prompt,
                         output_tokens=tokens if done else None, server_split=split)


LONG = request(100.0, 0.0676, 2, prompt=2000)  # alone: 2,000 tokens, first token at 67.6 ms
EIGHT = [request(110.0 + 0.001 * i, 0.02, 65) for i in range(8)]  # one send of 8, nothing else running


def test_a_simulators_target_and_why_others_have_none():
    assert TARGET.roofs.device == "NVIDIA H100 SXM" and TARGET.device_source == "simulator flags"
    assert live_target(None, "llama-3.1-8b", None, True) == "waiting for this host's GPUs to be read"
    assert "on another host" in live_target(None, "llama-3.1-8b", None, False)
    h100 = GpuReading(index="0", name="NVIDIA H100 80GB HBM3", server_mem_bytes=1)
    assert live_target(None, "llama-3.1-8b", [h100], True).device_source == "NVML"


def test_prefill_of_the_request_alone_and_decode_of_the_send_of_eight():
    view = live_roofline(TARGET, [LONG, *EIGHT], None)
    assert view.prefill.tokens == 2000 and view.prefill.achieved_flops == pytest.approx(PREFILL_FLOPS / 0.0676)
    assert view.decode.batch == 8 and view.decode.bound == "bandwidth"
    mid_answer = 200 + 32.5
    assert view.decode.achieved_flops == pytest.approx(8 * 200 * (16e9 + 4 * 32 * 4096 * (mid_answer + 0.5)))
    assert view.lines[0] == ("prefill of 2,000 tokens: 49 % of the compute roof (MFU); a longer prompt stays at this "
                             "roof and costs more time")
    assert view.lines[1].startswith("decode at batch 8: ")
    assert view.heading == "NVIDIA H100 SXM (simulator flags) · Llama-3.1-8B at 16 bit · ridge 295 FLOP/byte"
    assert [p.phase for p in view.points] == ["prefill", "decode"]


def test_the_servers_own_split_times_the_prefill_where_it_gives_one():
    timed = request(100.0, 0.0700, 2, prompt=2000, split=ServerSplit(prefill_s=0.0676, cached_tokens=0))
    assert live_roofline(TARGET, [timed], None).prefill.achieved_flops == pytest.approx(PREFILL_FLOPS / 0.0676)


def test_requests_that_overlapped_others_are_not_placed():
    """A long prompt landing among the 8 streams: its prefill shared the steps, and their batch was 9."""
    among = request(110.05, 0.09, 2, prompt=2000)
    view = live_roofline(TARGET, [*EIGHT, among], None)
    assert view.prefill is None and view.decode is None
    assert view.lines[:2] == (NO_PREFILL, NO_DECODE)


def test_a_send_still_streaming_places_its_prefill_but_not_yet_its_decode():
    streaming = request(120.0, 0.03, 10, done=False)
    view = live_roofline(TARGET, [*EIGHT, streaming], None)
    assert view.decode.batch == 8  # the newest finished send, which nothing overlapped
    assert view.prefill.tokens == 200  # the streaming request's prefill ran alone: it has its first token
    assert view.prefill.achieved_flops == pytest.approx((2 * 8e9 * 200 + 4 * 32 * 4096 * 200 * 100) / 0.03)


def snapshot(flops_per_s, read_gbs) -> MetricsSnapshot:
    return MetricsSnapshot(t_unix=0.0, engine="vllm", window_s=30.0, est_flops_per_s=flops_per_s, est_read_gbs=read_gbs)


def test_the_servers_estimate_over_its_window():
    view = live_roofline(TARGET, [], snapshot(20e12, 2000.0))
    assert view.estimate.intensity_flop_per_byte == pytest.approx(10.0) and view.estimate.achieved_flops == 20e12
    assert view.estimate.roof_share == pytest.approx(2000 / 3350)  # bandwidth bound: its share is the bandwidth's
    assert figures_lines(view)[1] == ("server est.        10.0      20.0      33.5    60 %  bandwidth  · its own "
                                      "counters over the last 30 s, both phases")
    assert "--enable-mfu-metrics" in live_roofline(TARGET, [], snapshot(None, None)).lines[2]
    assert live_roofline(TARGET, [], None).lines[2] == "server estimate: no /metrics window yet"


def test_the_figures_table_has_a_row_a_point():
    view = live_roofline(TARGET, [LONG, *EIGHT], None)
    header, prefill, decode = figures_lines(view)
    assert header.split() == ["FLOP/byte", "TFLOP/s", "roof", "share", "bound"]
    assert prefill.split() == ["prefill", "2,065.5", "488.9", "989.0", "49", "%", "compute"]
    assert decode.startswith("decode ×8") and decode.endswith("bandwidth")
    assert figures_lines(live_roofline(TARGET, [], None)) == []


def test_nvml_measures_the_bandwidth_of_a_server_on_this_hosts_gpu():
    gpu = GpuReading(index="0", name="NVIDIA H100 80GB HBM3", server_mem_bytes=1, mem_bw_gbs=2010.0,
                     mem_bw_source="gpm")
    target = live_target(None, "llama-3.1-8b", [gpu], True)
    view = live_roofline(target, [], None, [gpu])
    assert view.lines[-1] == "NVML measures 2,010 GB/s of DRAM traffic now: 60 % of the bandwidth roof"
    busy = GpuReading(index="0", name="NVIDIA H100 80GB HBM3", server_mem_bytes=1, mem_bw_util=0.5,
                      mem_bw_source="utilization")
    assert "GPM" in live_roofline(target, [], None, [busy]).lines[-1]
    assert not any("NVML" in line for line in live_roofline(TARGET, [], None, [gpu]).lines)  # a simulated device


def test_no_target_is_a_heading_and_no_points():
    view = live_roofline("the server is on another host", [LONG], None)
    assert view.heading == "no roofline: the server is on another host" and view.points == () and view.roofs is None


@pytest.mark.parametrize(("before", "after", "rate"), [(1e12, 5e12, 2e12), (0.0, 0.0, None), (None, None, None)])
def test_the_estimated_flops_rate_over_a_scrape_window(before, after, rate):
    def reading(t, value):
        counters = {} if value is None else {"est_flops_total": value}
        return ServerReading(t_mono=t, t_unix=t, engine="vllm", counters=counters)
    assert build_snapshot(reading(10.0, before), reading(12.0, after)).est_flops_per_s == rate


def test_streams_sent_a_little_apart_still_decode_as_one_batch():
    """A busy client's 8 sends spread over 40 ms (a timeline could split them into batches): one batch of 8."""
    spread = [request(110.0 + 0.005 * i, 0.02, 257) for i in range(8)]  # 1.28 s of decode each
    assert live_roofline(TARGET, spread, None).decode.batch == 8


def test_a_loads_streams_coming_and_going_are_no_batch():
    """Streams overlapping one another only in part: the batch changed under them, so no one batch is placed."""
    churn = [request(110.0 + 0.3 * i, 0.02, 65) for i in range(6)]  # each 0.32 s, a new one every 0.3 s
    view = live_roofline(TARGET, [request(100.0, 0.02, 65), *churn], None)
    assert view.decode.batch == 1  # the stream before them, alone
    assert live_roofline(TARGET, churn, None).lines[1] == NO_DECODE


def test_the_last_sweeps_are_traced_and_decode_has_its_8_bit_ghost_beside_it():
    swept = {"concurrency": [{"streams": n, "batch_decode_tok_s": n * 200.0, "context_tokens": 328.0} for n in (1, 8)],
             "prompt-tokens": [{"prompt_tokens": 2000, "ttft_s": 0.0686, "prefill_tok_s": 2000 / 0.0676}],
             "prefix": [{"prefix_tokens": 1000}]}
    view = live_roofline(TARGET, [LONG, *EIGHT], None, swept=swept)
    assert [t.vary for t in view.traces] == ["concurrency", "prompt-tokens"]  # a prefix sweep has no trace
    assert [p.batch for p in view.traces[0].points] == [1, 8]
    assert view.traces[1].points[0].achieved_flops == pytest.approx(PREFILL_FLOPS / 0.0676)
    # decode of the 8 at half the weight bytes: further right, under a higher roof, measured by nothing
    assert view.ghost.source == "projected" and view.ghost.batch == 8
    assert view.ghost.intensity_flop_per_byte > 1.8 * view.decode.intensity_flop_per_byte
    assert view.lines[2].startswith("8 bit, projected at the same ")
    assert view.lines[3:5] == (view.traces[0].reading, view.traces[1].reading)
    assert view.points == (view.prefill, view.decode)  # the ghost and the traces are drawn apart from the live points
    assert live_roofline(TARGET, [], None).ghost is None  # no decode measured: nothing to project


def test_a_speculating_servers_decode_sits_right_by_the_tokens_it_verifies():
    """3 drafts a step, 2.5 tokens a step accepted: each step computes 4 tokens a sequence and gives 2.5 of them."""
    labels = 'engine="0",model_name="m"'
    page = (f"vllm:spec_decode_num_drafts_total{{{labels}}} 100\nvllm:spec_decode_num_draft_tokens_total{{{labels}}} 300\n"
            f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} 150\n")
    speculating = build_snapshot(None, read_scrape(page, 0.0, 0.0))
    plain, spec = live_roofline(TARGET, EIGHT, None).decode, live_roofline(TARGET, EIGHT, speculating).decode
    assert spec.verified == 4 and plain.verified == 1
    assert spec.intensity_flop_per_byte == pytest.approx(4 * plain.intensity_flop_per_byte, rel=0.01)
    # the same 200 tok/s a stream came 2.5 a step: a step took 2.5× as long, for 4× the FLOPs
    assert spec.achieved_flops == pytest.approx(plain.achieved_flops * 4 / 2.5, rel=0.01)
    assert spec.reading.startswith("decode at batch 8, verifying 4 tokens a sequence (speculation): ")
