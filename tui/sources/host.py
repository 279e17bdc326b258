"""Host CPU and RAM, and a local server process found by its listening port (psutil; sync).

For CPU-only llama.cpp and Ollama servers this is the view that matters: the server's cores and
resident memory. Ollama runs the model in a child of `ollama serve`, so children are summed in.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from urllib.parse import urlsplit

import psutil

from tui.core.telemetry.readings import HostSample, ProcessSample


def local_port(url: str | None) -> int | None:
    """The port of a URL whose host is this machine, else None (a remote server's process is not ours to see)."""
    if not url:
        return None
    parts = urlsplit(url if "://" in url else f"http://{url}")
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    if host in ("localhost", socket.gethostname()):
        return port
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    return port if address.is_loopback or address.is_unspecified else None


def find_listening_process(port: int) -> tuple[psutil.Process | None, str | None]:
    """The process listening on a TCP port, or None and why."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, PermissionError):
        return None, "listing sockets needs more privileges here"
    listeners = [c for c in connections if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port]
    if not listeners:
        return None, f"nothing listens on port {port} here"
    pids = [c.pid for c in listeners if c.pid]
    if not pids:
        return None, f"the process on port {port} belongs to another user"
    try:
        return psutil.Process(pids[0]), None
    except psutil.Error as error:
        return None, f"port {port}: {type(error).__name__}"


class ListenerFinder:
    """The process listening on a port, remembered while it runs.

    A full scan (`psutil.net_connections`) reads every process's open files: about 12 ms of CPU on a
    host with 125 processes, which a once-a-second poll cannot afford. So the scan runs again only
    when the process found has exited (a restart), and at most every `rescan_s` while none is found.
    """

    def __init__(self, port: int, rescan_s: float = 5.0) -> None:
        self.port = port
        self.rescan_s = rescan_s
        self._process: psutil.Process | None = None
        self._reason: str | None = None
        self._next_scan = 0.0

    def find(self) -> tuple[psutil.Process | None, str | None]:
        if self._process is not None:
            if _serving(self._process):
                return self._process, None
            self._process, self._next_scan = None, 0.0  # it exited: look again now
        now = time.monotonic()
        if now >= self._next_scan:
            self._process, self._reason = find_listening_process(self.port)
            self._next_scan = now + self.rescan_s
        return self._process, self._reason


def _serving(process: psutil.Process) -> bool:
    """Still running and not a zombie: a dead child its parent has not reaped yet is still "running" to psutil."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def server_family(process: psutil.Process) -> list[psutil.Process]:
    """The server process and all its descendants (vLLM's EngineCore, Ollama's runner)."""
    try:
        return [process, *process.children(recursive=True)]
    except psutil.Error:
        return [process]


class HostSampler:
    """Samples the host; CPU percentages are over the time since the previous sample."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port
        self._listener = ListenerFinder(port) if port is not None else None
        self._tracked: dict[int, psutil.Process] = {}
        self.sample()  # prime: psutil's first cpu_percent call measures nothing

    def sample(self) -> HostSample:
        memory = psutil.virtual_memory()
        process, reason = self._server_process()
        return HostSample(
            cpu_percent=psutil.cpu_percent(None),
            cpu_count=psutil.cpu_count() or 1,
            ram_used_bytes=memory.total - memory.available,
            ram_total_bytes=memory.total,
            ram_available_bytes=memory.available,
            process=process,
            process_reason=reason,
        )

    def _server_process(self) -> tuple[ProcessSample | None, str | None]:
        if self._listener is None:
            return None, "no local server port given"
        root, reason = self._listener.find()
        if root is None:
            return None, reason
        cpu, rss, threads = 0.0, 0, 0
        family = server_family(root)
        for proc in family:
            tracked = self._tracked.setdefault(proc.pid, proc)
            try:
                with tracked.oneshot():
                    cpu += tracked.cpu_percent(None)
                    rss += tracked.memory_info().rss
                    threads += tracked.num_threads()
            except psutil.Error:
                continue
        alive = {p.pid for p in family}
        self._tracked = {pid: p for pid, p in self._tracked.items() if pid in alive}
        try:
            name = root.name()
        except psutil.Error:
            name = "?"
        return ProcessSample(pid=root.pid, name=name, cpu_percent=cpu, rss_bytes=rss, num_threads=threads), None
