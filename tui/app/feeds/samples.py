"""GPU (NVML), host (psutil) and phasetop's own CPU, sampled in a thread: their calls block."""

from __future__ import annotations

import time
from collections.abc import Callable

import psutil
from textual.message import Message
from textual.worker import get_current_worker

from tui.app.messages import ClientSampled, GpuSampled, HostSampled
from tui.config import Settings
from tui.core.client_load import ClientLoad
from tui.sources.gpu import GpuSampler
from tui.sources.host import HostSampler


def poll_gpu(settings: Settings, server_port: int | None, client_load: ClientLoad, post: Callable[[Message], object]) -> None:
    """Sample every interval until the (thread) worker running this is cancelled."""
    cancelled = get_current_worker().cancelled_event
    host = HostSampler(server_port)
    own = psutil.Process()
    own.cpu_percent(None)  # the first reading only starts the interval
    with GpuSampler(server_port=server_port) as gpu:
        while not cancelled.is_set():
            post(GpuSampled(gpu.sample()))
            post(HostSampled(host.sample()))
            cancelled.wait(settings.poll.gpu_interval_s)
            if not cancelled.is_set():
                # Our own process: the streams' reading thread and the rendering share one GIL.
                cpu_pct, now = own.cpu_percent(None), time.time()
                client_load.sample(cpu_pct, now)
                post(ClientSampled(cpu_pct, now))
