"""Prefill/decode disaggregation's physics: the KV cache a prompt leaves behind, the time it takes to move, and the
cost of splitting one device between the two roles.

One prefill worker computes a prompt's KV cache; a decode worker pulls it over an interconnect and decodes from it.
The cache is the model layout's KV bytes per token times the tokens moved (the 8B layout: 128 KiB a token, so a
4,000-token prompt is about 524 MB); the move takes bytes / link + a fixed latency. Run on one device, both roles
time-slice its bandwidth and compute, and each holds its own copy of the weights.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.core.hardware.devices import Device
from tui.core.hardware.models import ModelLayout
from tui.core.hardware.roofline import GB, kv_bytes_per_token

KV_TRANSFER_LATENCY_S = 0.5e-3
"""Fixed cost of one transfer beyond its bytes: the connector's handshake, the read's setup and its completion
notice (NIXL-style pulls take a few round trips of well under a millisecond each)."""


@dataclass(frozen=True, slots=True)
class KvLink:
    """An interconnect the KV cache moves over: its name, its rate, and the fixed cost of each transfer."""

    name: str
    gbs: float
    """GB/s (10^9 bytes per second) one transfer gets."""
    latency_s: float = KV_TRANSFER_LATENCY_S

    def transfer_s(self, nbytes: float) -> float:
        """Seconds to move `nbytes`: bytes / rate + the fixed latency."""
        return nbytes / (self.gbs * GB) + self.latency_s


KV_LINKS: dict[str, KvLink] = {
    "nvlink": KvLink("NVLink", 900),
    "ndr": KvLink("InfiniBand NDR", 50),
    "100gbe": KvLink("100 GbE", 12.5),
    "10gbe": KvLink("10 GbE", 1.25),
}
"""`--kv-link` presets, by the names a flag takes."""
DEFAULT_KV_LINK = "ndr"
"""The link of a disaggregated simulator (and of the experiment) unless one is named: what racks of GPUs use."""


def find_link(name: str) -> KvLink:
    """A preset by name (case forgiven) or a rate in GB/s ("25"); ValueError in one line otherwise."""
    key = name.strip().lower().replace(" ", "")
    if key in KV_LINKS:
        return KV_LINKS[key]
    try:
        gbs = float(key)
    except ValueError:
        raise ValueError(f"unknown KV link {name!r}: give {', '.join(KV_LINKS)} or a rate in GB/s") from None
    return link_of_rate(gbs)


def link_of_rate(gbs: float) -> KvLink:
    """A link of `gbs` GB/s (`--kv-link-gbs`); ValueError unless positive and finite."""
    if not 0 < gbs < float("inf"):
        raise ValueError(f"a KV link's rate must be above 0 GB/s, got {gbs:g}")
    return KvLink(f"{gbs:g} GB/s", gbs)


def device_copy_link(device: Device) -> KvLink:
    """Two instances on one device move the KV within its memory: each byte is read once and written once."""
    return KvLink(f"{device.name} memory", device.mem_bandwidth_gbs / 2)


def kv_transfer_tokens(prompt_tokens: int) -> int:
    """Prompt tokens whose KV moves: all but the last, which the decode worker recomputes to get its logits."""
    return max(prompt_tokens - 1, 0)


def kv_transfer_bytes(layout: ModelLayout, tokens: int, bytes_per_element: float = 2) -> int:
    """Bytes of `tokens` tokens' KV cache in this layout (16-bit cache unless told)."""
    return int(tokens * kv_bytes_per_token(layout, bytes_per_element))


def time_sliced_s(alone_s: float, busy_instances: int) -> float:
    """A step's time on a device that `busy_instances` instances (itself included) time-slice: each gets its share
    of the bandwidth and the compute, so a step that takes `alone_s` alone takes that many times as long."""
    return alone_s * max(busy_instances, 1)


def split_memory_utilization(gpu_memory_utilization: float, instances: int) -> float:
    """Each instance's share of the device's memory when `instances` share one device (each with its own weights)."""
    return gpu_memory_utilization / max(instances, 1)
