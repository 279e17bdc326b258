"""The decode ceiling of a real server: its model (from the id it serves) on the device NVML sees.

A simulator phasetop starts knows its own device and model. A real server does not say which GPU
it runs on, so the ceiling comes from this host's NVML readings (the GPUs where the server holds
memory, when that is known) or, with no GPU, the CPU row of the ceiling table; the weights come
from the model id it reports. Where either is unknown the answer says so instead of guessing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tui.core.hardware.devices import Device, UnknownDeviceError, find_device
from tui.core.hardware.models import ModelLayout, find_preset, find_served_model
from tui.core.hardware.roofline import kv_bytes_per_token, served_ceiling, weight_bytes
from tui.core.telemetry.readings import GpuReading, serving_devices
from tui.core.untrusted import one_line

MIN_BITS, MAX_BITS = 1, 64
"""Weight bit widths a simulator's flags may give (it runs 16, 8 and 4)."""


@dataclass(frozen=True, slots=True)
class ServerCeiling:
    """A real server's single-stream decode ceiling (context 0), or why there is none."""

    line: str
    """For a person: the figures it comes from, or "ceiling: unknown model …"."""
    decode_ceiling_tok_s: float | None = None
    kv_bytes_per_token: float | None = None
    """KV cache bytes each token of context adds to a step (16-bit cache); None when the layout is unknown."""
    weight_bytes: float | None = None
    mem_bandwidth_gbs: float | None = None
    """The bandwidth the ceiling divides (a slowed simulator's: its device's ÷ its time scale)."""
    cpu_row: bool = False
    """True when the ceiling is the CPU row's: this host shows no GPU, so the local server runs on its CPU."""
    device: str | None = None
    """What the server runs on, for the header ("NVIDIA H100 80GB HBM3", "simulated H100 SXM", "CPU (no GPU
    seen)"); None when it is not known."""


def server_ceiling(model_id: str | None, devices: Sequence[GpuReading], server_is_local: bool,
                   model_bytes: float | None = None, bandwidth_gbs: float | None = None) -> ServerCeiling:
    """Bandwidth of the server's devices ÷ bytes of weights read per token.

    `devices` are this host's NVML readings; an empty sequence means this host has no GPU, so a local
    server runs on the CPU. Several GPUs holding the server's memory are taken as tensor parallel
    (their bandwidths add). `model_bytes` is the weights' real size where the server reports it
    (llama.cpp); otherwise the size is the preset layout's parameters at the bit width of the id's
    quantization tag. A `bandwidth_gbs` the user gives (`--bandwidth-gbs`: a CPU host's measured
    bandwidth, a remote server's GPU) replaces whatever the devices would say.
    """
    if not server_is_local and bandwidth_gbs is None:
        return ServerCeiling("ceiling: unknown device (the server is on another host; its GPU is not visible here)")
    if not model_id:
        return ServerCeiling("ceiling: waiting for the server's model id")
    served = find_served_model(model_id)
    if served is None and not model_bytes:
        return ServerCeiling(f"ceiling: unknown model {model_id!r} (no preset layout matches; not guessed)")
    bandwidth = (f"{bandwidth_gbs:,.0f} GB/s as given", bandwidth_gbs) if bandwidth_gbs else _bandwidth(devices)
    if isinstance(bandwidth, str):
        return ServerCeiling(bandwidth)
    device, device_gbs = bandwidth
    kv_token = kv_bytes_per_token(served[0]) if served else None
    if model_bytes:
        weights, what = float(model_bytes), "the size the server reports"
    else:
        assert served is not None  # neither a layout nor a size returned above
        layout, bits = served
        weights, what = weight_bytes(layout.params, bits), f"{layout.name} at {bits} bit"
    tok_s, line = served_ceiling(f"{device}; {what}", device_gbs, weights)
    return ServerCeiling(line, tok_s, kv_token, weights, device_gbs, cpu_row=not devices and not bandwidth_gbs,
                         device=None if bandwidth_gbs else device)


def ceiling_for(simulator_flags: Mapping[str, object] | None, model_id: str | None, devices: Sequence[GpuReading] | None,
                server_is_local: bool, model_bytes: float | None = None,
                bandwidth_gbs: float | None = None) -> ServerCeiling | None:
    """The ceiling of a server phasetop did not start, for the UI and the command line alike.

    A phasetop simulator (its `/version` flags name a device and model phasetop knows) gets its simulated
    device's ceiling, whatever this host has; any other server gets `server_ceiling` on this host's
    devices. None when those devices are needed but not read yet (`devices` None).
    """
    simulated = simulator_ceiling(simulator_flags) if simulator_flags else None
    if simulated is not None:
        return simulated
    if devices is None:
        return None
    return server_ceiling(model_id, devices, server_is_local, model_bytes, bandwidth_gbs)


def simulator_ceiling(flags: Mapping[str, object]) -> ServerCeiling | None:
    """The ceiling of a phasetop simulator from the flags it publishes (`/version`'s `phasetop_sim`).

    Its device is simulated, so this host's GPUs (or lack of them) say nothing about it. None when the
    flags name a device or model this phasetop does not know. The flags come from a server: a bit width
    or time scale that is not a usable number gives a ceiling with no figure whose line says what was
    sent, and the model is looked up among the presets only (`find_preset`): a name a server sends is
    never read as a config file path.
    """
    gpu, model = flags.get("gpu"), flags.get("model")
    if not isinstance(gpu, str) or not isinstance(model, str):
        return None
    try:
        device = find_device(gpu)
    except UnknownDeviceError:
        return None
    layout = find_preset(model)
    if layout is None:
        return None
    bits = _whole(flags.get("bits", "16"))
    if bits is None or not MIN_BITS <= bits <= MAX_BITS:
        return _sent("bits", flags.get("bits"), f"a whole number from {MIN_BITS} to {MAX_BITS}")
    time_scale = _number(flags.get("time_scale", "1"))
    if time_scale is None or not time_scale > 0:
        return _sent("time_scale", flags.get("time_scale"), "a number above 0")
    return simulated_ceiling(device, layout, bits, time_scale)


def simulated_ceiling(device: Device, layout: ModelLayout, bits: int = 16, time_scale: float = 1.0) -> ServerCeiling:
    """A simulator's ceiling on its device and model: slowed by `time_scale`, it decodes that many times below
    its device's ceiling."""
    weights = weight_bytes(layout.params, bits)
    slower = f"; {time_scale:g}× slower" if time_scale != 1 else ""
    bandwidth_gbs = device.mem_bandwidth_gbs / time_scale
    tok_s, line = served_ceiling(f"simulated {device.name}; {layout.name} at {bits} bit{slower}", bandwidth_gbs, weights)
    return ServerCeiling(line, tok_s, kv_bytes_per_token(layout), weights, bandwidth_gbs, device=f"simulated {device.name}")


def _sent(flag: str, value: object, expected: str) -> ServerCeiling:
    return ServerCeiling(f"ceiling: the simulator sent {flag} {one_line(repr(value) if isinstance(value, str) else value, 40)}"
                         f" where {expected} was expected")


def _whole(value: object) -> int | None:
    """A flag as a whole number ("16" or 16), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _number(value: object) -> float | None:
    """A flag as a finite number ("0.5" or 0.5), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _bandwidth(devices: Sequence[GpuReading]) -> tuple[str, float] | str:
    """(label, GB/s) of the devices serving, or a line saying why there is none."""
    if not devices:
        cpu = find_device("cpu")
        return f"{cpu.name} (no GPU seen)", cpu.mem_bandwidth_gbs
    serving = serving_devices(devices)
    if any(d.is_mig for d in serving):
        return "ceiling: unknown device (a MIG slice's share of the bandwidth is not published)"
    per_device = []
    for reading in serving:
        try:
            per_device.append(find_device(reading.name).mem_bandwidth_gbs)
        except UnknownDeviceError:
            if not reading.peak_bw_gbs:
                return f"ceiling: unknown device {reading.name!r} (no preset and no peak bandwidth from NVML)"
            per_device.append(reading.peak_bw_gbs)
    names = sorted({d.name for d in serving})
    label = " + ".join(names) if len(serving) == 1 or len(names) > 1 else f"{len(serving)}× {names[0]}"
    if len(devices) > 1 and not any(d.server_mem_bytes for d in devices):
        label += f" (GPU {serving[0].index} of {len(devices)}: which ones serve is not known)"
    return label, sum(per_device)
