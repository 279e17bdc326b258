"""The decode ceiling of a server phasetop did not start: a real one (a scripted vLLM stand-in that does
not say it is a simulator), and a phasetop simulator given by --url (it publishes its own device), with
NVML answered by a fake so this host's device is fixed whatever this machine has."""

from __future__ import annotations

import pynvml
import pytest

from testbeds.scripted_server import Script, ScriptedServer
from tests.app.harness import CEILING, completed, settings, wait_for
from tests.fixtures.fake_pynvml import FakeGpu, FakeNvml
from tui.app.app import PhasetopApp
from tui.app.messages import GpuSampled, ServerCameUp
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sources.ceiling import server_decode_ceiling
from tui.sources.detect import describe_server
from tui.sources.http import make_client

H100_NVML = FakeGpu(name="NVIDIA H100 80GB HBM3", max_mem_clock_mhz=2619, bus_width_bits=5120, gpm=False)


async def command_line_ceiling(url: str):
    """What `phasetop ceiling --url` and probe's guard derive for the server (tui.sources.ceiling)."""
    async with make_client(url) as client:
        return await server_decode_ceiling(client, await describe_server(client, "openai", None))


def shown(screen, selector: str) -> str:
    return str(screen.query_one(selector).render())


@pytest.fixture
def real_url():
    """A vLLM stand-in serving the 8B id; its /version is vLLM's, with no simulator flags."""
    server = ScriptedServer(Script(model="meta-llama/Llama-3.1-8B-Instruct", tokens=["tok"] * 24)).start()
    yield server.url
    server.stop()


async def test_the_model_id_and_nvmls_gpu_give_the_ceiling(real_url, monkeypatch):
    FakeNvml([H100_NVML]).install(monkeypatch)
    seen = []
    app = PhasetopApp(settings(), real_url)  # as `phasetop --url`: no simulator of its own, no ceiling handed in
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: screen.decode_ceiling_tok_s is not None)
        assert screen.state.server.served.model == "meta-llama/Llama-3.1-8B-Instruct"
        assert screen.decode_ceiling_tok_s == pytest.approx(3350e9 / 16e9)
        await pilot.pause(0.1)
        pane = shown(screen, "#gpu-text")
        assert "decode ceiling 209 tok/s: 3,350 GB/s ÷ 16,000 MB weights" in pane
        assert "(NVIDIA H100 80GB HBM3; Llama-3.1-8B at 16 bit)" in pane
        assert "Llama-3.1-8B-Instruct · on NVIDIA H100 80GB HBM3 · ceiling 209 tok/s" in shown(screen, "#status")
        await pilot.press("1")
        await wait_for(pilot, lambda: len(completed(seen)) == 1)
        await pilot.pause(0.1)
        [done] = completed(seen)
        share = done.timing.decode_tok_s / (3350e9 / 16e9)
        assert f"= {share:.0%} of the 209 tok/s ceiling" in shown(screen, "#timeline-figures")


async def test_no_gpu_takes_the_cpu_row(real_url, monkeypatch):
    FakeNvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND).install(monkeypatch)
    seen = []
    app = PhasetopApp(settings(), real_url)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: screen.decode_ceiling_tok_s is not None)
        assert screen.decode_ceiling_tok_s == pytest.approx(90e9 / 16e9)
        await pilot.pause(0.1)
        pane = shown(screen, "#gpu-text")
        assert "decode ceiling 6 tok/s: 90 GB/s ÷ 16,000 MB weights" in pane and "(no GPU seen)" in pane


async def test_an_unknown_model_says_so_and_shows_no_share(monkeypatch):
    FakeNvml([H100_NVML]).install(monkeypatch)
    seen = []
    server = ScriptedServer(Script(model="mistralai/Mistral-7B-Instruct-v0.3")).start()
    try:
        app = PhasetopApp(settings(), server.url)
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: screen.cpu_ceiling is not None)
            assert screen.decode_ceiling_tok_s is None
            await pilot.pause(0.1)
            assert "ceiling: unknown model 'mistralai/Mistral-7B-Instruct-v0.3'" in shown(screen, "#gpu-text")
            await pilot.press("1")
            await wait_for(pilot, lambda: len(completed(seen)) == 1)
            # The panes are given state at most every PUBLISH_INTERVAL_S: wait for the completed request's figures.
            await wait_for(pilot, lambda: "decode" in shown(screen, "#timeline-figures"))
            assert "ceiling" not in shown(screen, "#timeline-figures")
    finally:
        server.stop()


async def test_a_simulator_given_by_url_gets_its_own_ceiling_not_this_hosts(monkeypatch):
    """`phasetop sim` in one terminal, `phasetop` in another: no GPU here, yet the simulated H100's ceiling."""
    FakeNvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND).install(monkeypatch)
    with SimulatorProcess.start(["--gpu", "H200", "--time-scale", "2"]) as sim:
        app = PhasetopApp(settings(), sim.url, save_runs=False)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: screen.state.server.simulator_flags is not None and screen.decode_ceiling_tok_s is not None)
            await pilot.pause(0.2)
            assert screen.decode_ceiling_tok_s == pytest.approx(4800e9 / 16e9 / 2)
            pane = shown(screen, "#gpu-text")
            assert "decode ceiling 150 tok/s" in pane and "simulated NVIDIA H200" in pane and "2× slower" in pane
            assert "no GPU seen" not in pane
            cli = await command_line_ceiling(sim.url)
            assert (cli.decode_ceiling_tok_s, cli.line) == (screen.decode_ceiling_tok_s, screen.cpu_ceiling)


async def test_the_command_line_gives_the_ceiling_the_ui_shows_for_a_real_server(real_url, monkeypatch):
    FakeNvml([H100_NVML]).install(monkeypatch)
    app = PhasetopApp(settings(), real_url, save_runs=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: screen.decode_ceiling_tok_s is not None)
        cli = await command_line_ceiling(real_url)
        assert (cli.decode_ceiling_tok_s, cli.line, cli.kv_bytes_per_token) == (
            screen.decode_ceiling_tok_s, screen.cpu_ceiling, screen.state.server.derived.kv_bytes_per_token)


async def test_a_simulator_phasetop_started_keeps_its_own_ceiling(sim_url, monkeypatch):
    FakeNvml([FakeGpu(name="NVIDIA H200")]).install(monkeypatch)
    seen = []
    app = PhasetopApp(settings(), sim_url, "simulated H100 SXM · Llama-3.1-8B", CEILING)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: any(isinstance(m, ServerCameUp) for m in seen))
        await wait_for(pilot, lambda: any(isinstance(m, GpuSampled) for m in seen))
        await pilot.pause(0.1)
        assert screen.decode_ceiling_tok_s == CEILING[0]  # the H200 this host shows is not the simulated H100
        assert screen.cpu_ceiling is None
