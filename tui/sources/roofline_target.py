"""The device and model a server's roofline is drawn for, found from the server: a phasetop simulator's own flags,
else the served model's id on this host's GPU that holds the server's memory (NVML; the CPU row where there is none).
"""

from __future__ import annotations

import asyncio

import httpx

from tui.core.hardware.devices import Device
from tui.core.hardware.models import ModelLayout
from tui.core.hardware.roofline_target import RooflineTarget, served_target, simulator_target
from tui.sources.detect import ServerInfo
from tui.sources.gpu import GpuSampler
from tui.sources.host import local_port
from tui.sources.identity import local_command_flags, simulator_flags


async def find_roofline_target(client: httpx.AsyncClient, server: ServerInfo, *, device: Device | None = None,
                               layout: ModelLayout | None = None, bits: int | None = None) -> RooflineTarget | str:
    """The target, or the line saying what is missing; what the user names (`device`, `layout`, `bits`) wins, but a
    simulator's bit width is its own (its target's `device_source` is "simulator flags")."""
    flags = await simulator_flags(client)
    if flags is not None and device is None:
        return simulator_target(flags, layout)
    port = local_port(server.url)
    devices = ()
    if port is not None and device is None:
        with GpuSampler(port) as sampler:
            devices = (await asyncio.to_thread(sampler.sample)).devices
    return served_target(server.model, devices, port is not None, layout=layout, bits=bits, device=device,
                         command_flags=local_command_flags(server.url))
