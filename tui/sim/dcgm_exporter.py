"""A stand-in for NVIDIA's dcgm-exporter: fixed `DCGM_FI_*` gauges per GPU on /metrics, for tests and the fleet demo.

The exposition is dcgm-exporter's: one gauge family per field, each GPU's sample labelled `gpu`, `UUID`,
`pci_bus_id`, `device`, `modelName`, `Hostname` and `DCGM_FI_DRIVER_VERSION`; profiling fields (`DCGM_FI_PROF_*`)
are fractions 0–1, framebuffer fields MiB. The values are whatever it was given (`set` changes them live).
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tui.core.hardware.devices import Device
from tui.core.fleet.promql import escape

DRIVER_VERSION = "570.124.06"
FIELDS = (
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "sm_clock_mhz"),
    ("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", "mem_clock_mhz"),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "temp_c"),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "power_w"),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "util_pct"),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "fb_free_mib"),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "fb_used_mib"),
    ("DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned.", "sm_active"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active.", "tensor_active"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active sending or receiving data.",
     "dram_active"),
)
"""(name, help, ExporterGpu attribute) in the order dcgm-exporter's default counters list them."""


@dataclass(frozen=True, slots=True)
class ExporterGpu:
    """One GPU's identity and the values its fields report."""

    index: int
    model_name: str
    hostname: str
    memory_mib: float
    dram_active: float = 0.0
    sm_active: float = 0.0
    tensor_active: float = 0.0
    fb_used_mib: float = 0.0
    sm_clock_mhz: float = 1980.0
    mem_clock_mhz: float = 2619.0
    temp_c: float = 45.0
    power_w: float = 300.0
    uuid: str = ""

    @property
    def util_pct(self) -> float:
        return round(self.sm_active * 100)

    @property
    def fb_free_mib(self) -> float:
        return max(0.0, self.memory_mib - self.fb_used_mib)

    def labels(self) -> str:
        pairs = (("gpu", str(self.index)), ("UUID", self.uuid), ("pci_bus_id", f"00000000:{0x18 + self.index:02X}:00.0"),
                 ("device", f"nvidia{self.index}"), ("modelName", self.model_name), ("Hostname", self.hostname),
                 ("DCGM_FI_DRIVER_VERSION", DRIVER_VERSION))
        return ",".join(f'{k}="{escape(v)}"' for k, v in pairs)


def host_gpus(device: Device, count: int, hostname: str, model_name: str | None = None, **values: float) -> list[ExporterGpu]:
    """`count` GPUs of one preset on one host, each with the same field values and its own UUID."""
    return [ExporterGpu(i, model_name or device.name, hostname, device.memory_gb * 1e9 / 2**20, uuid=f"GPU-{uuid.uuid4()}", **values)
            for i in range(count)]


def exposition(gpus: list[ExporterGpu]) -> str:
    """The /metrics page: HELP and TYPE per field, then one sample per GPU."""
    lines = []
    for name, help_text, attribute in FIELDS:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        lines += [f"{name}{{{gpu.labels()}}} {getattr(gpu, attribute):g}" for gpu in gpus]
    return "\n".join(lines) + "\n"


class DcgmExporter:
    """The exporter on a loopback port, served from a thread: `.url`, `.set(**values)`, `.stop()`, a context manager."""

    def __init__(self, gpus: list[ExporterGpu], host: str = "127.0.0.1", port: int = 0) -> None:
        self._gpus = list(gpus)
        self._lock = threading.Lock()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = exporter.page().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:  # scrapes every second: no access log
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="dcgm-exporter")
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def gpus(self) -> list[ExporterGpu]:
        with self._lock:
            return list(self._gpus)

    def page(self) -> str:
        return exposition(self.gpus)

    def set(self, **values: float) -> None:
        """New values for every GPU's fields (`dram_active=0.5`), served from the next scrape on."""
        with self._lock:
            self._gpus = [replace(gpu, **values) for gpu in self._gpus]

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> "DcgmExporter":
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()
