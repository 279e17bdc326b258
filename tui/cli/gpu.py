"""`phasetop gpu`: memory bandwidth against peak, SM activity and memory per GPU, and the host."""

from __future__ import annotations

import argparse
import time

from tui.cli.commands import COMMANDS
from tui.cli.common import settings_from
from tui.cli.options import add_json_option
from tui.cli.output import EXIT_OK, EXIT_USAGE, CliError, emit_json, say
from tui.core.telemetry.readings import GpuReading, GpuSample, HostSample
from tui.sources.gpu import GPM_MIN_WINDOW_S, GpuSampler
from tui.sources.host import HostSampler, local_port


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "gpu",
        help=COMMANDS["gpu"],
        description="Sample NVML and the host. Bandwidth comes from GPM's DRAM counter (Hopper and newer) "
        "over the window between two samples, so the first sample is a baseline and every one shown "
        "spans --interval seconds; without GPM, `mem_bw_source` is \"utilization\": NVML's memory-busy "
        "time share, not bandwidth, and no GB/s is given. With no GPU or driver: no devices, a "
        "`reason`, exit 0. --json prints one document: the last sample's fields at the top and all "
        "samples under `samples`.",
    )
    parser.add_argument("--interval", type=float, default=1.0, metavar="S", help=f"seconds between samples (default 1, at least {GPM_MIN_WINDOW_S})")
    parser.add_argument("--count", type=int, default=1, metavar="N", help="number of samples (default 1)")
    parser.add_argument("--url", help="a local server's URL: its process's GPU memory, CPU and RSS are shown (default: settings)")
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.interval < GPM_MIN_WINDOW_S:
        raise CliError(f"--interval must be ≥ {GPM_MIN_WINDOW_S} s (GPM reads zeros over shorter windows)", EXIT_USAGE)
    if args.count < 1:
        raise CliError("--count must be ≥ 1", EXIT_USAGE)
    port = local_port(args.url) if args.url else _settings_port(args)
    samples: list[dict] = []
    host = HostSampler(port)
    with GpuSampler(server_port=port) as gpus:
        if gpus.reason is None:
            gpus.sample()  # the baseline a GPM window needs
        for _ in range(args.count):
            time.sleep(args.interval)
            sample, host_sample = gpus.sample(), host.sample()
            samples.append(_sample_json(sample, host_sample))
            if not args.json:
                say(format_sample(sample, host_sample))
    if args.json:
        emit_json({**samples[-1], "interval_s": args.interval, "samples": samples})
    return EXIT_OK


def _settings_port(args: argparse.Namespace) -> int | None:
    return local_port(settings_from(args).url)


def _sample_json(sample: GpuSample, host: HostSample) -> dict:
    return {**sample.to_json(), "host": host.to_json()}


GIB = 1024**3
"""Memory in GiB, as the UI, `free -h` and nvidia-smi's MiB show it (bandwidth stays in decimal GB/s, as vendors quote it)."""


def _gib(value: float | None) -> str:
    return "–" if value is None else f"{value / GIB:,.1f} GiB"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.0f}%"


def _device_line(d: GpuReading) -> str:
    if d.mem_bw_source == "gpm":
        gbs = f"{d.mem_bw_gbs:,.0f} GB/s" if d.mem_bw_gbs is not None else "–"
        peak = f" of {d.peak_bw_gbs:,.0f} ({d.peak_bw_source})" if d.peak_bw_gbs else ""
        bandwidth = f"DRAM {gbs}{peak} = {_pct(d.mem_bw_util)}"
    elif d.mem_bw_source == "utilization":
        bandwidth = f"mem busy {_pct(d.mem_bw_util)} of the time (no GPM: not bandwidth)"
    else:
        bandwidth = "bandwidth –"
    line = (f"GPU {d.index} {d.name}: {bandwidth}  SM {_pct(d.sm_util)}  "
            f"mem {_gib(d.mem_used_bytes)} / {_gib(d.mem_total_bytes)}")
    if d.server_mem_bytes is not None:
        line += f"  server {_gib(d.server_mem_bytes)}"
    if d.reason:
        line += f"\n  ({d.reason})"
    return line


def format_sample(sample: GpuSample, host: HostSample) -> str:
    """One line per device, then the host, for a person."""
    lines = [_device_line(d) for d in sample.devices]
    if not sample.devices:
        lines.append(f"no GPUs: {sample.reason}")
    elif sample.reason:
        lines.append(f"({sample.reason})")
    host_line = (f"host: CPU {host.cpu_percent:.0f}% of {host.cpu_count} cores  "
                 f"RAM {_gib(host.ram_used_bytes)} / {_gib(host.ram_total_bytes)}")
    if host.process:
        p = host.process
        host_line += f"  server {p.name} (pid {p.pid}): CPU {p.cpu_percent:.0f}%  RSS {_gib(p.rss_bytes)}"
    lines.append(host_line)
    return "\n".join(lines)
