import pytest

from tui.core.hardware.models import MODELS, find_served_model
from tui.core.hardware.server_ceiling import ceiling_for, server_ceiling, simulator_ceiling
from tui.core.telemetry.readings import GpuReading

H100 = GpuReading(index="0", name="NVIDIA H100 80GB HBM3")
LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.mark.parametrize(("model_id", "preset", "bits"), [
    ("meta-llama/Llama-3.1-8B-Instruct", "8b", 16),
    ("llama3.1:8b", "8b", 16),
    ("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "8b", 8),
    ("llama3.1:8b-instruct-q4_K_M", "8b", 4),
    ("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "8b", 4),
    ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b", 16),
    ("google/gemma-3-270m-it", "gemma-3-270m", 16),
    ("gemma3:270m", "gemma-3-270m", 16),
    ("Llama-3.2-1B-Instruct-Q8_0.gguf", "llama-3.2-1b", 8),
    ("meta-llama/Llama-3.1-70B-Instruct", "llama-3.1-70b", 16),
])
def test_served_ids_find_their_layout_and_bit_width(model_id, preset, bits):
    assert find_served_model(model_id) == (MODELS[preset], bits)


@pytest.mark.parametrize("model_id", ["llama3.1:latest", "mistralai/Mistral-7B-Instruct-v0.3", "8b", "", "Llama-3.1-8B-Extra"])
def test_ids_that_name_no_preset_are_unknown(model_id):
    assert find_served_model(model_id) is None


def test_h100_and_the_8b_id_give_the_domain_ceiling():
    result = server_ceiling(LLAMA_8B, [H100], server_is_local=True)
    assert result.decode_ceiling_tok_s == pytest.approx(3350e9 / 16e9) and not result.cpu_row
    assert result.weight_bytes == 16e9
    assert result.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2
    assert result.line == ("decode ceiling 209 tok/s: 3,350 GB/s ÷ 16,000 MB weights\n"
                           "  (NVIDIA H100 80GB HBM3; Llama-3.1-8B at 16 bit)")


def test_the_quantization_tag_sets_the_weight_bytes():
    result = server_ceiling("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", [H100], server_is_local=True)
    assert result.weight_bytes == 8e9
    assert result.decode_ceiling_tok_s == pytest.approx(3350e9 / 8e9)


def test_no_gpu_uses_the_cpu_row():
    result = server_ceiling(LLAMA_8B, [], server_is_local=True)
    assert result.decode_ceiling_tok_s == pytest.approx(90e9 / 16e9) and result.cpu_row
    assert "90 GB/s ÷ 16,000 MB" in result.line and "(CPU, dual channel DDR5-5600 (no GPU seen);" in result.line


def test_a_reported_model_size_replaces_the_preset_size():
    result = server_ceiling("some-finetune.gguf", [], server_is_local=True, model_bytes=4.9e9)
    assert result.decode_ceiling_tok_s == pytest.approx(90e9 / 4.9e9)
    assert result.kv_bytes_per_token is None  # no layout known: no KV figure invented
    assert "90 GB/s ÷ 4,900 MB weights" in result.line and "the size the server reports" in result.line


def test_an_unknown_model_is_said_not_guessed():
    result = server_ceiling("mistralai/Mistral-7B-Instruct-v0.3", [H100], server_is_local=True)
    assert result.decode_ceiling_tok_s is None
    assert result.line.startswith("ceiling: unknown model 'mistralai/Mistral-7B-Instruct-v0.3'")


def test_a_remote_server_gets_no_ceiling_from_this_hosts_gpu():
    result = server_ceiling(LLAMA_8B, [], server_is_local=False)  # no GPU here says nothing of the server's host
    assert result.decode_ceiling_tok_s is None and not result.cpu_row and "another host" in result.line


def test_gpus_holding_the_servers_memory_add_their_bandwidth():
    devices = [GpuReading(index=str(i), name="NVIDIA H100 80GB HBM3", server_mem_bytes=70 << 30 if i < 2 else None)
               for i in range(4)]
    result = server_ceiling(LLAMA_8B, devices, server_is_local=True)
    assert result.decode_ceiling_tok_s == pytest.approx(2 * 3350e9 / 16e9)
    assert "2× NVIDIA H100 80GB HBM3" in result.line


def test_several_gpus_and_none_known_to_serve_take_the_first_and_say_so():
    devices = [GpuReading(index="0", name="NVIDIA H200"), GpuReading(index="1", name="NVIDIA H200")]
    result = server_ceiling(LLAMA_8B, devices, server_is_local=True)
    assert result.decode_ceiling_tok_s == pytest.approx(4800e9 / 16e9)
    assert "GPU 0 of 2" in result.line


def test_an_unknown_gpu_name_falls_back_to_nvmls_peak_else_says_unknown():
    with_peak = server_ceiling(LLAMA_8B, [GpuReading(index="0", name="NVIDIA Future X", peak_bw_gbs=1000.0)], True)
    assert with_peak.decode_ceiling_tok_s == pytest.approx(1000e9 / 16e9)
    without = server_ceiling(LLAMA_8B, [GpuReading(index="0", name="NVIDIA Future X")], True)
    assert without.decode_ceiling_tok_s is None and "unknown device 'NVIDIA Future X'" in without.line


def test_a_mig_slice_has_no_ceiling():
    mig = GpuReading(index="0/1", name="NVIDIA H100 80GB HBM3 MIG 1g.10gb", is_mig=True, server_mem_bytes=5 << 30)
    result = server_ceiling(LLAMA_8B, [mig], server_is_local=True)
    assert result.decode_ceiling_tok_s is None and "MIG" in result.line


def test_no_model_id_yet():
    assert server_ceiling(None, [H100], True).decode_ceiling_tok_s is None


def test_a_given_bandwidth_replaces_the_cpu_row_and_reaches_a_remote_server():
    local = server_ceiling(LLAMA_8B, [], server_is_local=True, bandwidth_gbs=60)
    assert local.decode_ceiling_tok_s == pytest.approx(60e9 / 16e9) and not local.cpu_row
    assert "60 GB/s ÷ 16,000 MB" in local.line and "as given" in local.line
    remote = server_ceiling(LLAMA_8B, [H100], server_is_local=False, bandwidth_gbs=4800)
    assert remote.decode_ceiling_tok_s == pytest.approx(4800e9 / 16e9)


def test_a_simulators_flags_give_its_simulated_ceiling_slowed_by_its_time_scale():
    flags = {"gpu": "NVIDIA H100 SXM", "model": "Llama-3.1-8B", "bits": "8", "time_scale": "20"}
    result = simulator_ceiling(flags)
    assert result.decode_ceiling_tok_s == pytest.approx(3350e9 / 8e9 / 20)
    assert result.weight_bytes == 8e9 and result.kv_bytes_per_token == 131072 and not result.cpu_row
    assert "simulated NVIDIA H100 SXM; Llama-3.1-8B at 8 bit; 20× slower" in result.line
    assert simulator_ceiling({**flags, "gpu": "TPU v9"}) is None
    assert simulator_ceiling({"model": "Llama-3.1-8B"}) is None


SIM_FLAGS = {"gpu": "NVIDIA H100 SXM", "model": "Llama-3.1-8B", "bits": "16", "time_scale": "1.0"}


def test_ceiling_for_a_simulator_is_its_own_whatever_this_host_has():
    for devices in (None, [], [GpuReading(index="0", name="NVIDIA H200")]):
        result = ceiling_for(SIM_FLAGS, LLAMA_8B, devices, server_is_local=True, bandwidth_gbs=60)
        assert result == simulator_ceiling(SIM_FLAGS) and result.mem_bandwidth_gbs == 3350


def test_ceiling_for_a_real_server_waits_for_the_devices_then_takes_them():
    assert ceiling_for(None, LLAMA_8B, None, server_is_local=True) is None
    assert ceiling_for(None, LLAMA_8B, [H100], server_is_local=True) == server_ceiling(LLAMA_8B, [H100], True)
    unknown_sim = {**SIM_FLAGS, "gpu": "TPU v9"}  # flags naming nothing phasetop knows: read as a real server
    assert ceiling_for(unknown_sim, LLAMA_8B, [], True, bandwidth_gbs=60).decode_ceiling_tok_s == pytest.approx(60e9 / 16e9)
