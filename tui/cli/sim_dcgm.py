"""`phasetop sim-dcgm`: a dcgm-exporter stand-in serving fixed `DCGM_FI_*` gauges for N GPUs of one host."""

from __future__ import annotations

import argparse
import threading

from tui.cli.commands import COMMANDS
from tui.cli.options import port_number
from tui.cli.output import EXIT_OK, EXIT_USAGE, CliError, note, say
from tui.core.hardware.devices import UnknownDeviceError, find_device

READY_PREFIX = "phasetop sim-dcgm listening on "
"""Printed on stdout with the URL once it listens (the fleet lab waits for it)."""


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not a fraction from 0 to 1")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sim-dcgm",
        help=COMMANDS["sim-dcgm"],
        description="Serve /metrics as dcgm-exporter does (labels gpu, UUID, pci_bus_id, device, modelName, Hostname, "
        "DCGM_FI_DRIVER_VERSION) for --count GPUs of one device preset on one host, with fixed values: "
        "DCGM_FI_PROF_DRAM_ACTIVE, _SM_ACTIVE, _PIPE_TENSOR_ACTIVE (fractions 0-1), DCGM_FI_DEV_FB_USED/_FREE (MiB), "
        "clocks, temperature, power. For tests and demos of `phasetop fleet`. Serves until stopped (Ctrl-C).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=9400, help="port (default 9400, dcgm-exporter's; 0 picks a free one)")
    parser.add_argument("--gpu", default="H100 SXM", metavar="NAME", help="device preset (default 'H100 SXM'; see `phasetop ceiling --list`)")
    parser.add_argument("--model-name", metavar="TEXT", help="the modelName label (default: the preset's name)")
    parser.add_argument("--count", type=int, default=1, metavar="N", help="GPUs on the host (default 1)")
    parser.add_argument("--hostname", default="localhost", metavar="H",
                        help="the Hostname label: the host part of the serving instances' `instance` label (default localhost)")
    parser.add_argument("--dram-active", type=_fraction, default=0.5, metavar="F", help="DCGM_FI_PROF_DRAM_ACTIVE (default 0.5)")
    parser.add_argument("--sm-active", type=_fraction, default=0.3, metavar="F", help="DCGM_FI_PROF_SM_ACTIVE (default 0.3)")
    parser.add_argument("--tensor-active", type=_fraction, default=0.1, metavar="F", help="DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (default 0.1)")
    parser.add_argument("--fb-used-mib", type=float, default=70000.0, metavar="MIB", help="DCGM_FI_DEV_FB_USED (default 70000)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tui.sim.dcgm_exporter import DcgmExporter, host_gpus

    if not 1 <= args.count <= 64:
        raise CliError("--count must be from 1 to 64", EXIT_USAGE)
    try:
        device = find_device(args.gpu)
    except UnknownDeviceError as error:
        raise CliError(str(error), EXIT_USAGE) from None
    gpus = host_gpus(device, args.count, args.hostname, args.model_name, dram_active=args.dram_active,
                     sm_active=args.sm_active, tensor_active=args.tensor_active, fb_used_mib=args.fb_used_mib)
    try:
        exporter = DcgmExporter(gpus, args.host, args.port)
    except OSError as error:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {error.strerror or error}") from None
    say(f"{READY_PREFIX}{exporter.url}")
    note(f"phasetop sim-dcgm: {args.count}× {device.name} on host {args.hostname!r}, DRAM active {args.dram_active:g}; Ctrl-C stops")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        exporter.stop()
    return EXIT_OK
