"""The decode ceiling of a server given by URL, from what it says about itself and this host's NVML.

The same decision as the UI's (`tui.core.hardware.server_ceiling.ceiling_for`), with one NVML reading taken
here instead of the UI's live samples: `phasetop ceiling --url`, and a guard in probe or bench.
"""

from __future__ import annotations

import asyncio

import httpx

from tui.core.hardware.server_ceiling import ServerCeiling, ceiling_for
from tui.core.telemetry.readings import GpuReading
from tui.sources.detect import ServerInfo
from tui.sources.gpu import GpuSampler
from tui.sources.host import local_port
from tui.sources.identity import simulator_flags


async def server_decode_ceiling(client: httpx.AsyncClient, info: ServerInfo,
                                bandwidth_gbs: float | None = None) -> ServerCeiling:
    """The single-stream decode ceiling of the server `client` talks to, described by `info`.

    A phasetop simulator's from its `/version` flags; any other server's from its model id (or the size it
    reports, llama.cpp) on this host's GPUs, or the CPU row where NVML sees none; `bandwidth_gbs` (the
    user's `--bandwidth-gbs`) replaces what the devices say. Never raises for an unknown model or device:
    the answer's `line` says why there is no figure.
    """
    flags = await simulator_flags(client)
    port = local_port(info.url)
    is_local = port is not None
    served = ceiling_for(flags, info.model, None, is_local, info.model_bytes, bandwidth_gbs)
    if served is None:  # not a simulator: this host's devices decide (a simulator's are never read)
        devices = await asyncio.to_thread(_devices_now, port)
        served = ceiling_for(flags, info.model, devices, is_local, info.model_bytes, bandwidth_gbs)
    return served


def _devices_now(server_port: int | None) -> tuple[GpuReading, ...]:
    """One NVML reading of this host's GPUs (which hold a local server's memory); empty without a GPU or driver."""
    with GpuSampler(server_port=server_port) as sampler:
        return sampler.sample().devices
