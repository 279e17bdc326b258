"""`phasetop sim --disaggregated`: the KV's move at the link's rate, the decode worker's counters, the roles on each
worker's /metrics, the transfer on the wire, a decode pool too small for two prompts at once, and the streams'
gaps while a 4,000-token prompt lands, on 1P1D and colocated.

On a `--time-scale 4` simulator, over 10 GbE so each transfer lasts hundreds of milliseconds: a loaded 2-core
machine's lateness is a small share of it.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys

import httpx
import pytest

from tui.core.experiments.disaggregation import KV_LINKS, kv_transfer_bytes
from tui.core.experiments.plans import make_plan
from tui.core.hardware.models import MODELS
from tui.sources.detect import describe_server
from tui.sources.workloads.experiments import run_experiment
from tui.sources.http import make_client
from tui.sources.workloads.prompts import prompt_of
from tui.sources.stream import StreamRequest, measure

pytestmark = pytest.mark.timing

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SCALE = 4.0
FLAGS = ("--disaggregated", "--kv-link", "10gbe", "--enable-per-request-metrics", "--time-scale", str(SCALE))
TRANSFER = re.compile(r"kv transfer (\S+) (prefill-\d) → (decode-\d): ([\d,]+) tokens, ([\d,]+) bytes in ([\d.]+) ms over")


async def send(client, tokens: int, max_tokens: int):
    prompt = await prompt_of(client, "openai", MODEL, tokens)
    timing = await measure(client, StreamRequest("openai", MODEL, prompt.text, max_tokens, prompt_tokens=prompt.tokens))
    assert timing.ok, timing.error
    return timing


def counter(text: str, name: str, **labels: str) -> float:
    """The value of one series of a /metrics exposition (labels matched as a subset)."""
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} {labels} in /metrics")


@pytest.fixture(scope="module")
def disaggregated(start_sim):
    return start_sim(*FLAGS)


def test_the_workers_are_printed_and_each_metrics_shows_its_role(disaggregated):
    assert set(disaggregated.workers) == {"prefill-0", "decode-0"}
    for name, url in disaggregated.workers.items():
        shown = subprocess.run([sys.executable, "-m", "tui", "metrics", "--url", url, "--once", "--interval", "0.2", "--json"],
                               capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["engine_config"]["role"] == name.split("-")[0]
        exposition = httpx.get(f"{url}/metrics").text
        assert f'role="{name.split("-")[0]}"' in exposition.split("vllm:num_requests_running{")[1].split("\n")[0]
    front = httpx.get(f"{disaggregated.url}/metrics").text
    assert 'role="decode"' in front and 'role="prefill"' not in front  # the front repeats the decode pool's series
    info = httpx.get(f"{disaggregated.url}/version").json()["phasetop_sim"]
    assert info["disaggregated"] == "True" and info["kv_link"] == "10 GbE" and info["split_one_device"] == "False"


async def test_transfer_time_is_bytes_over_the_link_and_the_decode_worker_counts_its_tokens(disaggregated):
    link = KV_LINKS["10gbe"]
    decode_url = disaggregated.workers["decode-0"]
    async with make_client(disaggregated.url) as client, make_client(decode_url) as decode:
        before = (await decode.get("/metrics")).text
        timings = [await send(client, tokens, 8) for tokens in (1000, 2000)]
        after = (await decode.get("/metrics")).text
    transfers = [m for m in TRANSFER.finditer(disaggregated.log_text())]
    mine = transfers[-2:]
    assert [int(m[4].replace(",", "")) for m in mine] == [999, 1999]
    for match, timing in zip(mine, timings, strict=True):
        tokens, nbytes, ms = int(match[4].replace(",", "")), int(match[5].replace(",", "")), float(match[6])
        assert nbytes == kv_transfer_bytes(MODELS["8b"], tokens)
        assert ms / 1000 == pytest.approx(link.transfer_s(nbytes), rel=0.02), match[0]
        split = timing.server_split  # on the wire: the last chunk's per-request metrics, on the stamps' (scaled) clock
        assert split.kv_transfer_bytes == nbytes
        assert split.kv_transfer_s == pytest.approx(SCALE * link.transfer_s(nbytes), rel=1e-6)
        assert split.prefill_s > split.kv_transfer_s  # the move is inside scheduled → first token
        assert timing.ttft_s > split.kv_transfer_s
    moved = counter(after, "vllm:prompt_tokens_by_source_total", source="external_kv_transfer") - \
        counter(before, "vllm:prompt_tokens_by_source_total", source="external_kv_transfer")
    computed = counter(after, "vllm:prompt_tokens_by_source_total", source="local_compute") - \
        counter(before, "vllm:prompt_tokens_by_source_total", source="local_compute")
    assert (moved, computed) == (999 + 1999, 2)  # the last prompt token of each is recomputed on the decode worker
    listed = httpx.get(f"{disaggregated.url}/sim/transfers").json()["transfers"]
    assert [t["bytes"] for t in listed[-2:]] == [int(m[5].replace(",", "")) for m in mine]


async def test_a_full_decode_pool_makes_the_next_prompt_wait(start_sim):
    # 0.2045 of 80 GB less 16 GB of weights: 171 blocks of 16 tokens, under two 1,500-token prompts' 188.
    sim = start_sim("--disaggregated", "--kv-link", "nvlink", "--time-scale", str(SCALE), "--gpu-memory-utilization",
                    "0.2045", "--max-model-len", "2048")
    async with make_client(sim.url) as client:
        first, second = await asyncio.gather(send(client, 1500, 64), send(client, 1500, 64))
    earlier, later = sorted((first, second), key=lambda t: t.t_sent_unix + t.ttft_s)
    # The later one's first token comes only after the earlier one finished and freed its blocks.
    assert later.t_sent_unix + later.ttft_s >= earlier.t_sent_unix + earlier.e2e_s


def itl_buckets(exposition: str) -> dict[float, float]:
    """The ITL histogram's cumulative counts by upper bound."""
    buckets = {}
    for line in exposition.splitlines():
        if line.startswith("vllm:inter_token_latency_seconds_bucket{"):
            le = line.split('le="')[1].split('"')[0]
            buckets[float(le)] = float(line.rsplit(" ", 1)[1])
    return buckets


def gap_bounds(before: dict[float, float], after: dict[float, float]) -> tuple[tuple[float, float], tuple[float, float]]:
    """(low, high] of the bucket holding the median gap and of the one holding the worst, between two scrapes."""
    edges = sorted(after)
    counts = [after[le] - before.get(le, 0) for le in edges]
    total = counts[-1]

    def bucket(rank: float) -> tuple[float, float]:
        index = next(i for i, count in enumerate(counts) if count >= rank)
        return (edges[index - 1] if index else 0.0), edges[index]

    return bucket(total / 2), bucket(total)


async def interference_gaps_on(url: str, metrics_url: str):
    """The interference workload (8 streams, a 4,000-token prompt lands) on the server at `url`; the bounds of
    its streams' median and worst gap as the server's ITL histogram at `metrics_url` saw them."""
    async with make_client(url) as client, make_client(metrics_url) as scrape:
        before = itl_buckets((await scrape.get("/metrics")).text)
        server = await describe_server(client, "openai", None)
        await run_experiment(client, server, make_plan("interference", [4000], 96))
        after = itl_buckets((await scrape.get("/metrics")).text)
    return gap_bounds(before, after)


async def test_on_1p1d_a_long_prompt_leaves_the_streams_gaps_within_twice_their_median(start_sim):
    # The server's clock, not the client's: a niced test on a shared 2-core box reads a step late now and then
    # (the client's ITL p99 is two steps there), and the simulated clock absorbs such late wake-ups. At 8× slowed,
    # each decode step is 39-41 ms: one ITL bucket, (0.025, 0.05], holds them all, so worst ≤ 0.05 ≤ 2 × median.
    pd = start_sim("--disaggregated", "--time-scale", "8")
    (median_low, _), (_, worst_high) = await interference_gaps_on(pd.url, pd.workers["decode-0"])
    assert worst_high <= 2 * median_low, (median_low, worst_high)
    colocated = start_sim("--no-enable-chunked-prefill", "--time-scale", "8")
    (_, median_high), (worst_low, _) = await interference_gaps_on(colocated.url, colocated.url)
    assert worst_low >= 5 * median_high, (median_high, worst_low)  # the 4,000-token step: 1.1 s against 40 ms
