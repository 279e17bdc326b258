"""GPU (NVML), host (psutil) and the meters' CPU, sampled in a thread: their calls block."""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message
from textual.worker import get_current_worker

from tui.app.messages import ClientSampled, GpuSampled, HostSampled
from tui.config import Settings
from tui.sources.gpu import GpuSampler
from tui.sources.host import HostSampler


def poll_gpu(settings: Settings, server_port: int | None, meter_cpu: Callable[[], float | None],
             post: Callable[[Message], object]) -> None:
    """Sample every interval until the (thread) worker running this is cancelled; `meter_cpu` reads the meters' CPU."""
    cancelled = get_current_worker().cancelled_event
    host = HostSampler(server_port)
    with GpuSampler(server_port=server_port) as gpu:
        while not cancelled.is_set():
            post(GpuSampled(gpu.sample()))
            post(HostSampled(host.sample()))
            post(ClientSampled(meter_cpu()))
            cancelled.wait(settings.poll.gpu_interval_s)
