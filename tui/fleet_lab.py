"""A fleet on one machine: a real Prometheus scraping three phasetop simulators and two dcgm-exporter stand-ins.

A demo and test harness, not a measuring path: `make demo-fleet`, the fleet tests and the screenshots start it;
nothing phasetop measures with imports it.

    with FleetLab.start() as lab:
        ...  # phasetop fleet --prometheus lab.prometheus_url

Each simulator listens on its own loopback address (127.0.0.2, .3, .4), so its `instance` label has a host of
its own, as servers on three machines would; the DCGM stand-ins report GPUs for the first two of those hosts
(the third has no DCGM: its bandwidth is "no data"). The simulators carry a `role` target label (prefill,
decode, none) for the pools. Prometheus is Debian's `prometheus` binary, run with a generated config and a
temporary TSDB on a free loopback port, scraping every second. `stop()` ends every process it started.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tui.core.hardware.devices import find_device
from tui.sim.dcgm_exporter import DcgmExporter, host_gpus
from tui.sources.servers.simulator_server import SimulatorProcess

SCRAPE_INTERVAL_S = 1.0
START_TIMEOUT_S = 30.0
PROMETHEUS_BINARY = "prometheus"
READY_PREFIX = "fleet lab: Prometheus at "
"""`main` prints this and the URL on stdout once every target has been scraped."""


class LabError(RuntimeError):
    """The lab could not start; one line saying what is missing or what failed."""


@dataclass(frozen=True, slots=True)
class LabServer:
    """One simulator the lab runs: where, with which flags, with which target labels."""

    host: str
    args: tuple[str, ...]
    role: str | None = None


@dataclass(frozen=True, slots=True)
class LabGpus:
    """One host's DCGM stand-in."""

    host: str
    gpu: str
    count: int
    dram_active: float


SERVERS = (
    LabServer("127.0.0.2", ("--max-num-batched-tokens", "512"), "prefill"),
    LabServer("127.0.0.3", ("--max-num-batched-tokens", "2048", "--max-num-seqs", "8"), "decode"),
    LabServer("127.0.0.4", ("--gpu", "H200", "--model", "llama-3.2-1b")),
)
DEMO_LOAD = ((2, 1500, 64), (12, 200, 256), (1, 100, 128))
"""Per simulator of SERVERS, (concurrent clients, prompt words, max tokens) for `--load`: long prompts through a
small token budget, more streams than the decode server seats (some wait: saturated), and a quiet one."""
GPUS = (LabGpus("127.0.0.2", "H100 SXM", 1, 0.6), LabGpus("127.0.0.3", "H100 SXM", 2, 0.25))


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def prometheus_config(sims: list[tuple[str, str | None]], exporters: list[str], interval_s: float) -> str:
    """prometheus.yml: job `vllm` (one static group per simulator, with its role label) and job `dcgm`."""
    lines = ["global:", f"  scrape_interval: {interval_s:g}s", f"  evaluation_interval: {interval_s:g}s", "scrape_configs:",
             "  - job_name: vllm", "    static_configs:"]
    for address, role in sims:
        lines.append(f"      - targets: ['{address}']")
        if role:
            lines.append(f"        labels: {{role: '{role}'}}")
    lines += ["  - job_name: dcgm", "    static_configs:", f"      - targets: [{', '.join(repr(a) for a in exporters)}]"]
    return "\n".join(lines) + "\n"


@dataclass
class FleetLab:
    """The running lab: `.prometheus_url`, `.sims` (in SERVERS' order), `.exporters`, and the means to change them."""

    prometheus_url: str = ""
    sims: list[SimulatorProcess] = field(default_factory=list)
    exporters: list[DcgmExporter] = field(default_factory=list)
    servers: tuple[LabServer, ...] = SERVERS
    _prometheus: subprocess.Popen | None = None
    _dir: tempfile.TemporaryDirectory | None = None

    @classmethod
    def start(cls, servers: tuple[LabServer, ...] = SERVERS, gpus: tuple[LabGpus, ...] = GPUS,
              interval_s: float = SCRAPE_INTERVAL_S, binary: str = PROMETHEUS_BINARY) -> "FleetLab":
        """Start everything and return once Prometheus is ready and has scraped every target once."""
        path = shutil.which(binary)
        if path is None:
            raise LabError(f"{binary!r} is not on PATH: install Debian's prometheus package (apt-get install prometheus)")
        lab = cls(servers=servers)
        try:
            for server in servers:
                lab.sims.append(SimulatorProcess.start(list(server.args), host=server.host))
            for host in gpus:
                lab.exporters.append(DcgmExporter(host_gpus(find_device(host.gpu), host.count, host.host, dram_active=host.dram_active,
                                                            sm_active=0.4, tensor_active=0.2, fb_used_mib=60000)))
            lab._start_prometheus(path, interval_s)
        except BaseException:
            lab.stop()
            raise
        return lab

    def _start_prometheus(self, path: str, interval_s: float) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="phasetop-fleet-")
        root = Path(self._dir.name)
        sims = [(s.url.removeprefix("http://"), server.role) for s, server in zip(self.sims, self.servers)]
        config = prometheus_config(sims, [e.url.removeprefix("http://") for e in self.exporters], interval_s)
        (root / "prometheus.yml").write_text(config)
        port = free_port()
        self.prometheus_url = f"http://127.0.0.1:{port}"
        log = (root / "prometheus.log").open("wb")
        self._prometheus = subprocess.Popen(
            [path, f"--config.file={root / 'prometheus.yml'}", f"--storage.tsdb.path={root / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=root)
        log.close()
        self._wait_ready(root / "prometheus.log", len(sims) + len(self.exporters))

    def _wait_ready(self, log: Path, n_targets: int) -> None:
        """Until /-/ready answers and every target has been scraped once (its `up` series exists)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        with httpx.Client(base_url=self.prometheus_url, timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self._prometheus.poll() is not None:
                    raise LabError(f"prometheus exited ({self._prometheus.returncode}): {_last_line(log)}")
                try:
                    if client.get("/-/ready").status_code == 200:
                        answer = client.get("/api/v1/query", params={"query": "up"}).json()
                        if len(answer["data"]["result"]) >= n_targets:
                            return
                except (httpx.HTTPError, ValueError, KeyError):
                    pass
                time.sleep(0.2)
        raise LabError(f"prometheus did not scrape its {n_targets} targets within {START_TIMEOUT_S:g} s: {_last_line(log)}")

    def restart_sim(self, index: int, args: tuple[str, ...] | None = None) -> None:
        """Stop simulator `index` and start it again on the same address and port, with new flags if given."""
        old = self.sims[index]
        address = old.url.removeprefix("http://")
        host, _, port = address.rpartition(":")
        old.stop()
        flags = list(args if args is not None else self.servers[index].args)
        self.sims[index] = SimulatorProcess.start([*flags, "--port", port], host=host)

    def kill_sim(self, index: int) -> None:
        """Stop simulator `index` for good: Prometheus's next scrape of it fails (`up` 0)."""
        self.sims[index].stop()

    def stop(self) -> None:
        """Stop Prometheus, the simulators and the exporters; remove the TSDB."""
        if self._prometheus is not None and self._prometheus.poll() is None:
            self._prometheus.terminate()
            try:
                self._prometheus.wait(10)
            except subprocess.TimeoutExpired:
                self._prometheus.kill()
                self._prometheus.wait()
        for sim in self.sims:
            sim.stop()
        for exporter in self.exporters:
            exporter.stop()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> "FleetLab":
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


def _last_line(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][-300:] if lines else ""


def send_load(lab: FleetLab, stop: threading.Event, load=DEMO_LOAD) -> list[threading.Thread]:
    """Clients sending completions in a loop to each simulator (by `load`) until `stop` is set, so the figures move."""

    def client(url: str, words: int, max_tokens: int) -> None:
        with httpx.Client(base_url=url, timeout=120) as http:
            model = http.get("/v1/models").json()["data"][0]["id"]
            text = "tell me about the roofline " * (words // 5)
            sent = 0
            while not stop.is_set():
                sent += 1  # a prompt of its own each time: the prefix cache would make every prefill but the first free
                try:
                    http.post("/v1/completions", json={"model": model, "prompt": f"[{threading.get_ident()}-{sent}] {text}",
                                                       "max_tokens": max_tokens})
                except httpx.HTTPError:
                    stop.wait(1.0)  # the simulator restarting or gone: try again in a while

    threads = [threading.Thread(target=client, args=(sim.url, words, tokens), daemon=True, name="fleet-load")
               for sim, (clients, words, tokens) in zip(lab.sims, load) for _ in range(clients)]
    for thread in threads:
        thread.start()
    return threads


def main(argv: list[str] | None = None) -> int:
    """`python -m tui.fleet_lab [--load]`: run the lab until Ctrl-C or SIGTERM, its Prometheus URL on stdout."""
    parser = argparse.ArgumentParser(prog="python -m tui.fleet_lab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--load", action="store_true", help="keep sending requests to the simulators (DEMO_LOAD)")
    args = parser.parse_args(argv)
    try:
        lab = FleetLab.start()
    except LabError as error:
        print(f"fleet lab: {error}", file=sys.stderr)
        return 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threads: list[threading.Thread] = []
    try:
        threads = send_load(lab, stop) if args.load else []
        print(f"{READY_PREFIX}{lab.prometheus_url}", flush=True)
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        lab.stop()
    for thread in threads:
        thread.join(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
