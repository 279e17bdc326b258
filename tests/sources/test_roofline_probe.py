"""The roofline's probe against a real simulator on loopback, with NVML faked where a GPU is read."""

import pytest

from tests.fixtures.fake_pynvml import FakeGpu, FakeNvml
from tui.config import Settings
from tui.core.hardware.decode_window import gpm_bytes_per_s
from tui.sources.detect import describe_configured
from tui.sources.gpu import GpuSampler
from tui.sources.http import client_for
from tui.sources.meter import LocalMeter
from tui.sources.workloads.roofline_probe import probe_decode, probe_prefill


async def decode(url, gpu=None, concurrency=2):
    async with client_for(Settings(url=url)) as client:
        server = await describe_configured(client, "auto", None)
        return await probe_decode(client, server, LocalMeter(client), concurrency, 32, 192, True, gpu)


async def test_the_prefill_request_is_counted_between_its_two_readings(sim_url):
    async with client_for(Settings(url=sim_url)) as client:
        server = await describe_configured(client, "auto", None)
        run = await probe_prefill(client, server, LocalMeter(client), 500, True)
    assert run.timing.ok and run.prompt_tokens == 500 and run.cached_tokens == 0
    assert run.prefill_source == "client" and run.prefill_s == run.timing.ttft_s
    grew = run.after.counters["prompt_tokens_total"] - run.before.counters["prompt_tokens_total"]
    generated = run.after.counters["generation_tokens_total"] - run.before.counters["generation_tokens_total"]
    assert grew == 500 and generated == 1


async def test_decode_readings_hold_a_stretch_of_the_whole_batch(sim_url):
    run = await decode(sim_url)
    assert len(run.timings) == 2 and all(t.ok and t.output_tokens == 192 for t in run.timings)
    assert run.readings[0].gauges["running"] == 0  # the reading before the streams went out
    window = run.window
    assert window is not None and window.batch == 2 and window.generated_tokens > 0
    assert run.gpu_samples == ()  # no GPU was asked for
    assert gpm_bytes_per_s(run.gpu_samples, window)[0] is None


async def test_nvml_is_sampled_with_each_reading_and_gives_the_stretchs_bandwidth(sim_url, monkeypatch):
    FakeNvml([FakeGpu(dram_pct=[40.0])]).install(monkeypatch)  # an H200: 40 % of its 4,800 GB/s
    with GpuSampler() as sampler:
        run = await decode(sim_url, sampler)
    assert len(run.gpu_samples) == len(run.readings)
    assert gpm_bytes_per_s(run.gpu_samples, run.window) == (pytest.approx(0.4 * 4800e9), "NVML GPM DRAM bandwidth")


async def test_a_gpu_without_gpm_gives_busy_time_only_and_says_so(sim_url, monkeypatch):
    FakeNvml([FakeGpu(name="NVIDIA A100-SXM4-80GB", gpm=False)]).install(monkeypatch)
    with GpuSampler() as sampler:
        run = await decode(sim_url, sampler, concurrency=1)
    bps, why = gpm_bytes_per_s(run.gpu_samples, run.window)
    assert bps is None and "GPM" in why
