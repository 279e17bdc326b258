"""Device presets: published memory bandwidth and dense bf16 compute, found by a forgiving name.

The first six rows are the domain text's table, with its bandwidth figures, in its order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Device:
    """One accelerator (or the CPU row) as its vendor's specification sheet gives it."""

    name: str
    """Display name, as the domain text's table spells it."""
    mem_bandwidth_gbs: float
    """Published peak memory bandwidth, GB/s (10^9 bytes per second)."""
    peak_bf16_tflops: float
    """Published dense bf16 tensor throughput, TFLOP/s (no sparsity)."""
    memory_gb: float
    """Device memory, GB, that weights and the KV pool share."""
    aliases: tuple[str, ...] = ()
    """Other spellings: NVML names, short forms. Matched after normalisation."""
    in_seed_table: bool = False
    """True for the six rows of the domain text's ceiling table."""


DEVICES: tuple[Device, ...] = (
    Device("CPU, dual channel DDR5-5600", 90, 2.0, 64, ("cpu", "ddr5", "ddr55600", "cpuddr5"), True),
    Device("NVIDIA A10G", 600, 70, 24, ("a10g",), True),
    Device("NVIDIA L40S", 864, 362, 48, ("l40s",), True),
    Device("NVIDIA RTX 4090", 1008, 165, 24, ("rtx4090", "4090", "geforcertx4090"), True),
    Device("NVIDIA A100 80GB SXM", 2039, 312, 80, ("a100", "a10080gb", "a100sxm", "a100sxm480gb", "a10080gbsxm"), True),
    Device("NVIDIA H100 SXM", 3350, 989, 80, ("h100", "h100sxm", "h100sxm5", "h10080gbhbm3", "h10080gb"), True),
    Device("NVIDIA H200", 4800, 989, 141, ("h200", "h200sxm", "h200141gb")),
    Device("NVIDIA H100 PCIe", 2000, 756, 80, ("h100pcie",)),
    Device("NVIDIA H100 NVL", 3900, 835, 94, ("h100nvl",)),
    Device("NVIDIA A100 40GB SXM", 1555, 312, 40, ("a10040gb", "a100sxm440gb")),
    Device("NVIDIA A100 80GB PCIe", 1935, 312, 80, ("a100pcie", "a10080gbpcie", "a100pcie80gb")),
    Device("NVIDIA B200", 8000, 2250, 180, ("b200",)),
    Device("NVIDIA L4", 300, 121, 24, ("l4",)),
    Device("NVIDIA A10", 600, 125, 24, ("a10",)),
    Device("NVIDIA RTX 3090", 936, 71, 24, ("rtx3090", "3090", "geforcertx3090")),
    Device("NVIDIA RTX 5090", 1792, 209, 32, ("rtx5090", "5090", "geforcertx5090")),
    Device("AMD MI300X", 5300, 1307, 192, ("mi300x", "instinctmi300x")),
)

_VENDOR_WORDS = ("nvidia", "amd", "tesla")


class UnknownDeviceError(LookupError):
    """No preset matches a device name."""


def normalise(name: str) -> str:
    """Lower-case, drop vendor words and everything that is not a letter or digit."""
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    for word in _VENDOR_WORDS:
        key = key.replace(word, "")
    return key


def _keys(device: Device) -> tuple[str, ...]:
    return (normalise(device.name), *device.aliases)


def find_device(name: str) -> Device:
    """The preset a name means: `H100`, `h100-sxm`, `"H100 SXM"` and NVML's `NVIDIA H100 80GB HBM3` are one.

    An exact key wins; otherwise the longest key that the name starts with, so NVML names with
    memory sizes and suffixes still resolve.
    """
    key = normalise(name)
    if not key:
        raise UnknownDeviceError(f"unknown device {name!r}")
    for device in DEVICES:
        if key in _keys(device):
            return device
    best: tuple[int, Device] | None = None
    for device in DEVICES:
        for alias in _keys(device):
            if key.startswith(alias) and (best is None or len(alias) > best[0]):
                best = (len(alias), device)
    if best is None:
        known = ", ".join(d.aliases[0] for d in DEVICES)
        raise UnknownDeviceError(f"unknown device {name!r} (known: {known})")
    return best[1]


def seed_table_devices() -> tuple[Device, ...]:
    """The six rows of the domain text's ceiling table, in its order."""
    return tuple(d for d in DEVICES if d.in_seed_table)
