import pytest

from tui.core.hardware.devices import UnknownDeviceError, find_device


@pytest.mark.parametrize("name", ["H100", "h100-sxm", "H100 SXM", "NVIDIA H100 80GB HBM3", "h100_sxm5"])
def test_forgiving_names_find_h100_sxm(name):
    assert find_device(name).mem_bandwidth_gbs == 3350


@pytest.mark.parametrize(("name", "bandwidth"), [
    ("NVIDIA H200", 4800), ("NVIDIA H100 PCIe", 2000), ("NVIDIA A100-SXM4-80GB", 2039),
    ("NVIDIA A100-SXM4-40GB", 1555), ("NVIDIA GeForce RTX 4090", 1008), ("cpu", 90), ("NVIDIA A10G", 600),
])
def test_nvml_and_short_names(name, bandwidth):
    assert find_device(name).mem_bandwidth_gbs == bandwidth


@pytest.mark.parametrize("name", ["", "   ", "Voodoo 2", "nvidia"])
def test_unknown_names_raise(name):
    with pytest.raises(UnknownDeviceError):
        find_device(name)
