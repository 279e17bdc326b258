"""GPUs as NVIDIA's dcgm-exporter reports them through Prometheus, and the rule that puts them on an instance's host.

`DCGM_FI_PROF_DRAM_ACTIVE` is the fraction of cycles the memory interface was busy: times the device's
published peak it is the bandwidth the GPU used, GB/s. The device comes from DCGM's `modelName` label matched
to phasetop's presets (tui.core.hardware.devices); a GPU phasetop has no preset for keeps its fractions, with no GB/s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tui.core.fleet.queries import DCGM_FIELDS, Sample, Want
from tui.core.hardware.devices import UnknownDeviceError, find_device


@dataclass(frozen=True, slots=True)
class JoinRules:
    """Which labels join DCGM's GPUs to serving instances: a GPU belongs to every instance on its host."""

    dcgm_host_label: str = "Hostname"
    """The label of DCGM's series naming the GPU's host (dcgm-exporter's own `Hostname`, or a relabelled `node`)."""
    instance_label: str = "instance"
    """The label of a serving instance's series whose host part (before `:port`) is the host."""


@dataclass(frozen=True, slots=True)
class FleetGpu:
    """One GPU at the evaluation time."""

    host: str | None
    gpu: str
    """DCGM's `gpu` index ("0")."""
    uuid: str | None
    model_name: str | None
    """DCGM's `modelName` ("NVIDIA H100 80GB HBM3")."""
    device: str | None
    """The phasetop preset it matched ("NVIDIA H100 SXM"), None when none does."""
    peak_gbs: float | None
    dram_active: float | None
    """Fraction 0–1 of cycles the memory interface was busy."""
    fb_used_mib: float | None
    sm_active: float | None
    tensor_active: float | None

    @property
    def dram_gbs(self) -> float | None:
        """DRAM active × the device's peak: the bandwidth used, GB/s."""
        return self.dram_active * self.peak_gbs if self.dram_active is not None and self.peak_gbs is not None else None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "dram_gbs": self.dram_gbs}


def host_part(address: str) -> str:
    """`10.0.0.5:8000` → `10.0.0.5`, `[::1]:8000` → `::1`, `gpu-node-3` → itself."""
    if address.startswith("["):
        return address[1:].partition("]")[0]
    host, colon, port = address.rpartition(":")
    return host if colon and port.isdigit() and ":" not in host else address


def gpus_from(results: Mapping[Want, Sequence[Sample]], rules: JoinRules = JoinRules()) -> list[FleetGpu]:
    """One FleetGpu per (host, UUID or gpu index) seen in any of the DCGM fields' answers."""
    fields: dict[tuple[str, str], dict[str, float]] = {}
    labels_of: dict[tuple[str, str], dict[str, str]] = {}
    for name, metric in DCGM_FIELDS.items():
        for labels, value in results.get(Want("dcgm", name, metric), ()):
            key = (labels.get(rules.dcgm_host_label, ""), labels.get("UUID") or labels.get("gpu", ""))
            fields.setdefault(key, {})[name] = value
            labels_of.setdefault(key, labels)
    gpus = []
    for key in sorted(fields):
        labels, values = labels_of[key], fields[key]
        model_name = labels.get("modelName")
        try:
            device = find_device(model_name) if model_name else None
        except UnknownDeviceError:
            device = None
        gpus.append(FleetGpu(
            host=key[0] or None, gpu=labels.get("gpu", ""), uuid=labels.get("UUID"), model_name=model_name,
            device=device.name if device else None, peak_gbs=device.mem_bandwidth_gbs if device else None,
            dram_active=values.get("dram_active"), fb_used_mib=values.get("fb_used_mib"),
            sm_active=values.get("sm_active"), tensor_active=values.get("tensor_active"),
        ))
    return gpus
