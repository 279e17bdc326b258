"""Which device and model a server's roofline is drawn for, and the lines that say why there is none."""

import pytest

from tui.core.hardware.devices import find_device
from tui.core.hardware.models import MODELS
from tui.core.hardware.roofline_target import chunk_of, served_target, simulator_target
from tui.core.telemetry.readings import GpuReading
from tui.sim.options import SimOptions
from tui.sim.step_cost import EngineConfig

H100_NVML = GpuReading(index="0", name="NVIDIA H100 80GB HBM3", server_mem_bytes=70 * 2**30)
IDLE_A100 = GpuReading(index="1", name="NVIDIA A100-SXM4-80GB")


def sim_flags(**config) -> dict[str, str]:
    """A real simulator's flags, as its /version publishes them."""
    return SimOptions(EngineConfig(find_device("H100"), MODELS["8b"], **config), "m", time_scale=2).sim_info()


def test_a_simulator_names_its_device_model_bits_time_scale_and_chunk():
    target = simulator_target(sim_flags(bits=8, max_num_batched_tokens=512))
    assert target.roofs.peak_bytes_per_s == 3350e9 / 2 and target.roofs.peak_flops == 989e12 / 2
    assert target.layout is MODELS["8b"] and target.bits == 8 and target.weight_bytes == 8e9
    assert target.chunk_tokens == 512 and target.device_source == target.model_source == "simulator flags"


def test_a_simulator_without_chunked_prefill_prefills_a_prompt_in_one_pass():
    assert simulator_target(sim_flags(enable_chunked_prefill=False, max_model_len=2048)).chunk_tokens is None


def test_a_simulator_of_an_unknown_model_asks_for_its_layout_and_takes_it():
    flags = {**sim_flags(), "model": "tiny-llama"}
    assert "pass its config.json with --layout" in simulator_target(flags)
    target = simulator_target(flags, layout=MODELS["llama-3.2-1b"])
    assert target.layout is MODELS["llama-3.2-1b"] and target.model_source == "--layout"


@pytest.mark.parametrize("change", [{"gpu": "voodoo"}, {"bits": "sixteen"}, {"time_scale": "0"}, {"time_scale": "inf"}])
def test_odd_simulator_flags_give_a_line_not_a_target(change):
    assert isinstance(simulator_target({**sim_flags(), **change}), str)


def test_a_local_server_on_this_hosts_gpu_that_holds_its_memory():
    target = served_target("meta-llama/Llama-3.1-8B-Instruct-FP8", [IDLE_A100, H100_NVML], True)
    assert target.roofs.device == "NVIDIA H100 SXM" and target.device_source == "NVML" and target.gpus == 1
    assert target.bits == 8 and target.model_source == "model id"


def test_tensor_parallel_adds_the_gpus_roofs():
    both = [H100_NVML, GpuReading(index="1", name="NVIDIA H100 80GB HBM3", server_mem_bytes=1)]
    target = served_target("llama-3.1-8b", both, True)
    assert target.gpus == 2 and target.roofs.peak_bytes_per_s == 2 * 3350e9
    assert target.roofs.device == "2× NVIDIA H100 SXM"


def test_no_gpu_here_is_the_cpu_row_and_a_remote_server_needs_gpu():
    assert served_target("llama-3.1-8b", [], True).device_source == "CPU row (no GPU seen)"
    assert "name it with --gpu" in served_target("llama-3.1-8b", [], False)
    given = served_target("llama-3.1-8b", [], False, device=find_device("a10g"))
    assert given.roofs.peak_bytes_per_s == 600e9 and given.device_source == "--gpu"


def test_unknown_model_mig_and_unknown_device_are_lines():
    assert "pass its config.json with --layout" in served_target("tiny", [H100_NVML], True)
    assert "MIG" in served_target("llama-3.1-8b", [GpuReading(index="0/1", name="x", is_mig=True)], True)
    assert "no device preset" in served_target("llama-3.1-8b", [GpuReading(index="0", name="Voodoo 5")], True)


def test_a_given_layout_and_bits_win_and_the_command_line_gives_the_chunk():
    target = served_target("tiny", [], True, layout=MODELS["gemma-3-270m"], bits=8,
                           command_flags={"max_num_batched_tokens": "512"})
    assert target.layout is MODELS["gemma-3-270m"] and target.bits == 8 and target.chunk_tokens == 512


def test_chunk_of_odd_values():
    assert chunk_of({}) is None and chunk_of({"max_num_batched_tokens": "inf"}) is None
    assert chunk_of({"max_num_batched_tokens": "0"}) is None
    assert chunk_of({"max_num_batched_tokens": "2048", "enable_chunked_prefill": "False"}) is None
