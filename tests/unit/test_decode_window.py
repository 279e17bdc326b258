"""The pure-decode stretch among a server's /metrics readings: one batch, no prefill, the server's own counts."""

from pathlib import Path

import pytest

from tui.core.hardware.decode_window import decode_window
from tui.core.telemetry.metric_names import read_scrape
from tui.core.telemetry.readings import Histogram, ServerReading


def reading(t, running, prompts, generated, steps=None, step_tokens=None, flops=None, read=None) -> ServerReading:
    counters = {"prompt_tokens_total": prompts, "generation_tokens_total": generated}
    if flops is not None:
        counters |= {"est_flops_total": flops, "est_read_bytes_total": read}
    histograms = {}
    if steps is not None:
        histograms["iteration_tokens"] = Histogram(((float("inf"), steps),), steps, step_tokens)
    return ServerReading(t_mono=t, t_unix=t, engine="vllm", gauges={"running": running}, counters=counters,
                         histograms=histograms, source_names={"running": "vllm:num_requests_running",
                                                              "iteration_tokens": "vllm:iteration_tokens_total"})


def test_the_longest_stretch_with_no_prompt_and_one_batch():
    readings = [
        reading(0.0, 0, 0, 0),  # before the load
        reading(0.2, 4, 256, 8),  # the prompts are in
        reading(0.4, 4, 256, 40),
        reading(0.6, 4, 256, 72),
        reading(0.8, 0, 256, 100),  # the answers ended
    ]
    window = decode_window(readings)  # from the second reading with the batch in: the prefill step may still count
    assert window.seconds == pytest.approx(0.2) and window.generated_tokens == 32
    assert window.decode_tok_s == pytest.approx(160) and window.batch == 4
    assert window.batch_source == "vllm:num_requests_running (running requests)"
    assert window.generated_before == 40 and window.est_flops is None
    assert (window.first, window.last) == (2, 3)


def test_a_join_ends_the_stretch():
    readings = [reading(0.0, 2, 100, 10), reading(0.5, 2, 100, 20), reading(1.0, 2, 100, 30), reading(1.5, 2, 150, 40),
                reading(2.0, 2, 150, 50), reading(4.0, 2, 150, 90)]
    window = decode_window(readings)
    assert window.seconds == pytest.approx(2.0) and window.generated_tokens == 40  # the later, longer stretch


def test_the_fullest_batch_wins_over_a_longer_smaller_one():
    readings = [reading(0.0, 3, 96, 0), reading(0.5, 3, 96, 30), reading(1.5, 3, 96, 90),  # three in, the fourth late
                reading(2.0, 4, 128, 110), reading(2.5, 4, 128, 150), reading(3.0, 4, 128, 190),
                reading(3.5, 0, 128, 230)]
    window = decode_window(readings)
    assert window.batch == 4 and (window.first, window.last) == (4, 5) and window.decode_tok_s == pytest.approx(80)


def test_tokens_per_step_from_the_iteration_histogram_and_the_servers_estimates():
    readings = [reading(0.5, 3, 64, 20, steps=8, step_tokens=94, flops=0.5e12, read=2e11),
                reading(1.0, 3, 64, 30, steps=10, step_tokens=100, flops=1e12, read=5e11),
                reading(2.0, 3, 64, 330, steps=110, step_tokens=400, flops=4e12, read=1.5e12)]
    window = decode_window(readings)
    assert window.batch == 3 and window.batch_source.startswith("vllm:iteration_tokens_total")
    assert window.est_flops == 3e12 and window.est_read_bytes == 1e12


@pytest.mark.parametrize("readings", [
    [],
    [reading(0.0, 1, 10, 5)],
    [reading(0.0, 0, 0, 0), reading(1.0, 1, 10, 5), reading(2.0, 1, 10, 25)],  # no reading before the second saw it
    [reading(0.0, 0, 10, 5), reading(1.0, 0, 10, 5), reading(2.0, 0, 10, 5)],  # idle
    [reading(0.0, 1, 10, 5), reading(1.0, 1, 10, 5), reading(2.0, 1, 10, 5)],  # counters that move at the end
    [reading(0.0, 1, 10, 50), reading(1.0, 1, 10, 50), reading(2.0, 1, 10, 3)],  # a restart
])
def test_no_stretch(readings):
    assert decode_window(readings) is None


def test_vllm_032s_page_gives_the_estimated_flops_and_tokens_per_step():
    page = (Path(__file__).parents[1] / "fixtures" / "metrics" / "vllm-0.32.txt").read_text()
    r = read_scrape(page, 0.0, 0.0)
    assert r.counters["est_flops_total"] == 4.2e12
    assert r.source_names["est_flops_total"] == "vllm:estimated_flops_per_gpu_total"
    steps = r.histograms["iteration_tokens"]
    assert steps.count == 3002 and steps.sum == 10156
