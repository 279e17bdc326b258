"""What a server's roofline is drawn for: its device's roofs, its model's layout and bit width, its prefill chunk.

A phasetop simulator says all of it in its flags. A real server says only its model id (and, run on this host,
its command line); its device is this host's GPU that holds its memory, or the CPU row where there is none.
Whatever is not known is said, never guessed: a roofline of the wrong device or model is a wrong picture
that looks right.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tui.core.hardware.devices import Device, UnknownDeviceError, find_device
from tui.core.hardware.models import ModelLayout, find_preset, find_served_model
from tui.core.hardware.roofline import Roofs, device_roofs, weight_bytes
from tui.core.telemetry.readings import GpuReading, serving_devices
from tui.core.untrusted import one_line


@dataclass(frozen=True, slots=True)
class RooflineTarget:
    """The device and model one server's phases are placed for."""

    roofs: Roofs
    layout: ModelLayout
    bits: int
    chunk_tokens: int | None
    """The most prompt tokens one step prefills (`--max-num-batched-tokens` with chunked prefill); None: unknown,
    a prompt is taken to be prefilled in one pass."""
    device_source: str
    """"simulator flags", "--gpu", "NVML" or "CPU row (no GPU seen)"."""
    model_source: str
    """"simulator flags", "--layout" or "model id"."""
    gpus: int = 1
    """GPUs the server spreads over (tensor parallel): the roofs are theirs together, a per-GPU estimate × this."""

    @property
    def weight_bytes(self) -> float:
        return weight_bytes(self.layout.params, self.bits)

    def to_json(self) -> dict[str, Any]:
        return {"device": self.roofs.device, "device_source": self.device_source, "gpus": self.gpus,
                "model": self.layout.name, "params": self.layout.params, "bits": self.bits,
                "weight_bytes": self.weight_bytes, "model_source": self.model_source, "chunk_tokens": self.chunk_tokens}


def simulator_target(flags: Mapping[str, str], layout: ModelLayout | None = None) -> RooflineTarget | str:
    """A phasetop simulator's device and model from its `/version` flags (`layout`: the user's, for a simulator
    of a config.json model); a line saying what is missing when they name nothing phasetop knows."""
    try:
        device = find_device(str(flags.get("gpu", "")))
    except UnknownDeviceError:
        return f"the simulator runs an unknown device {one_line(str(flags.get('gpu')), 60)!r}"
    model_source = "--layout" if layout is not None else "simulator flags"
    layout = layout or find_preset(str(flags.get("model", "")))
    if layout is None:
        return (f"the simulator runs a model with no preset layout ({one_line(str(flags.get('model')), 60)!r}): "
                "pass its config.json with --layout")
    bits, time_scale = _number(flags.get("bits", "16")), _number(flags.get("time_scale", "1"))
    if bits is None or not 1 <= bits <= 64 or time_scale is None or time_scale <= 0:
        return "the simulator sent a bit width or time scale that is not a usable number"
    return RooflineTarget(device_roofs(device, time_scale), layout, int(bits), chunk_of(flags), "simulator flags",
                          model_source)


def served_target(model_id: str | None, devices: Sequence[GpuReading], server_is_local: bool, *,
                  layout: ModelLayout | None = None, bits: int | None = None, device: Device | None = None,
                  command_flags: Mapping[str, str] | None = None) -> RooflineTarget | str:
    """A real server's target: the model from `layout` (the user's) or its id, the device from `device` (the
    user's) or this host's GPUs (`devices`, NVML's; empty: none, so a local server runs on the CPU)."""
    model_source = "--layout"
    if layout is None:
        served = find_served_model(model_id) if model_id else None
        if served is None:
            return (f"no preset layout matches the model {one_line(model_id or '', 80)!r}: pass its config.json "
                    "with --layout (and --bits)")
        layout, id_bits = served
        bits, model_source = bits or id_bits, "model id"
    chunk = chunk_of(command_flags or {})
    if device is not None:
        return RooflineTarget(device_roofs(device), layout, bits or 16, chunk, "--gpu", model_source)
    if not server_is_local:
        return "the server is on another host, so its GPU is not visible here: name it with --gpu"
    if not devices:
        return RooflineTarget(device_roofs(find_device("cpu")), layout, bits or 16, chunk, "CPU row (no GPU seen)",
                              model_source)
    serving = serving_devices(devices)
    if any(d.is_mig for d in serving):
        return "the server runs on a MIG slice, whose share of the roofs is not published: name a device with --gpu"
    try:
        presets = [find_device(d.name) for d in serving]
    except UnknownDeviceError:
        return f"no device preset for {one_line(serving[0].name, 60)!r}: name the nearest with --gpu"
    roofs = device_roofs(presets[0])
    if len(presets) > 1:
        roofs = Roofs(f"{len(presets)}× {presets[0].name}", sum(p.peak_bf16_tflops for p in presets) * 1e12,
                      sum(p.mem_bandwidth_gbs for p in presets) * 1e9)
    return RooflineTarget(roofs, layout, bits or 16, chunk, "NVML", model_source, gpus=len(presets))


def chunk_of(flags: Mapping[str, str]) -> int | None:
    """The prefill chunk a server's flags set: `max_num_batched_tokens` while chunked prefill is on."""
    if str(flags.get("enable_chunked_prefill", "True")) == "False":
        return None
    chunk = _number(flags.get("max_num_batched_tokens"))
    return int(chunk) if chunk is not None and chunk >= 1 else None


def _number(value: object) -> float | None:
    """A flag as a finite number ("16" or 16), else None."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None
