"""`make gpu-check` (scripts/gpu_check.py): is this host's GPU telemetry what phasetop says it is?

It opens NVML through phasetop's own sampler (`tui.sources.gpu`, the code the UI and `phasetop gpu` run), reads the
driver, the peak and GPM, samples the GPU idle, then while a known memory-bound load runs: decode on the server
`--url` names, else a plain device-to-device copy when torch is installed. One verdict line per check; exit 1 when
one FAILs, 0 otherwise, and 0 with "no GPU here" where NVML finds none. The copy path imports only nvidia-ml-py and
psutil (and torch in its child), so it runs under a bare GPU host's python3; --url needs phasetop installed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import NoReturn

from tui.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError, emit_json, note, say
from tui.core.hardware.gpu_check import (
    Check,
    Load,
    NoLoad,
    activity_check,
    bandwidth_check,
    driver_check,
    gpm_check,
    idle_check,
    load_check,
    peak_check,
    summary_line,
)
from tui.core.telemetry.readings import GpuReading
from tui.core.urls import bad_url
from tui.sources.gpu import GPM_MIN_WINDOW_S, GpuSampler
from tui.sources.workloads.copy_load import CopyLoad, LoadFailed, torch_installed

IDLE_WINDOWS = 2
COPY_MARGIN_S = 1.0
"""The copy runs this much longer than the sampling, so the last window ends while it still copies."""
NO_LOAD_HINT = ("install torch built with CUDA for the copy, or give --url of a server that runs on this GPU; "
                "nothing drives the GPU")


class _Parser(argparse.ArgumentParser):
    """A usage error is one line on stderr and exit 2."""

    def error(self, message: str) -> NoReturn:
        note(f"gpu-check: {message}; --help lists the options")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gpu-check",
        description="Check NVML, GPM and phasetop's bandwidth figures on this host's GPU while a known memory-bound "
        "load runs: decode on --url, else a device-to-device copy (needs torch). One verdict line per check.",
    )
    parser.add_argument("--gpu", metavar="INDEX",
                        help="the GPU to check: 0, or 0/1 for MIG device 1 (default: the first)")
    parser.add_argument("--seconds", type=float, default=5.0, metavar="S", help="sampling under load (default 5)")
    parser.add_argument("--interval", type=float, default=0.5, metavar="S",
                        help=f"one NVML window (default 0.5, at least {GPM_MIN_WINDOW_S})")
    parser.add_argument("--copy-mib", type=int, default=1024, metavar="MIB",
                        help="size of each of the copy's two buffers (default 1024: far past any L2)")
    parser.add_argument("--no-load", action="store_true", help="check NVML and GPM only; drive nothing")
    decode = parser.add_argument_group("decode on a server (needs phasetop installed: httpx, pydantic-settings)")
    decode.add_argument("--url", help="a server on this GPU: its decode is the load instead of the copy")
    decode.add_argument("--api", choices=("auto", "openai", "ollama", "llamacpp"), help="wire API (default: detect)")
    decode.add_argument("--model", help="model name (default: the server's first)")
    decode.add_argument("--streams", type=int, default=1, metavar="N",
                        help="streams decoding at once (default 1: the purest bandwidth-bound case)")
    decode.add_argument("--prompt-tokens", type=int, default=16, metavar="N", help="each prompt's length (default 16)")
    decode.add_argument("--max-tokens", type=int, default=512, metavar="K", help="each answer's length (default 512)")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout (messages go to stderr)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except CliError as error:
        note(f"gpu-check: {error}")
        return error.exit_code
    except KeyboardInterrupt:
        note("gpu-check: interrupted")
        return 130


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    with GpuSampler() as sampler:
        first = sampler.sample()  # the window since NVML opened: the devices and GPM's status
        if not first.devices:
            return _no_gpu(args, first.reason or "NVML sees no GPU")
        target = _target(first.devices, args.gpu)
        idle = _windows(sampler, target.index, IDLE_WINDOWS, args.interval)
        load, loaded = _drive(args, sampler, target)
        versions = sampler.versions
    latest = idle[-1]
    checks = [
        driver_check(versions, _binding_version(), first.devices),
        peak_check(latest),
        gpm_check(idle + loaded, *_user(), args.interval),
        idle_check(idle, args.interval),
        load_check(load, latest.peak_bw_gbs),
        bandwidth_check(load, loaded, args.interval),
        activity_check(load, loaded),
    ]
    failed = any(c.verdict == "fail" for c in checks)
    if args.json:
        emit_json(_document(checks, load, idle, loaded, versions, latest, args.interval))
    else:
        for check in checks:
            say(check.line)
        say(summary_line(checks))
    return EXIT_FAILED if failed else EXIT_OK


def _check_args(args: argparse.Namespace) -> None:
    if args.interval < GPM_MIN_WINDOW_S:
        raise CliError(f"--interval must be ≥ {GPM_MIN_WINDOW_S} s (GPM reads zeros over shorter windows)",
                       EXIT_USAGE)
    if not args.seconds >= args.interval:
        raise CliError("--seconds must be at least one --interval", EXIT_USAGE)
    for flag, value in (("--copy-mib", args.copy_mib), ("--streams", args.streams),
                        ("--prompt-tokens", args.prompt_tokens), ("--max-tokens", args.max_tokens)):
        if value < 1:
            raise CliError(f"{flag} must be at least 1", EXIT_USAGE)
    if args.url and (problem := bad_url(args.url)):
        raise CliError(problem, EXIT_USAGE)


def _no_gpu(args: argparse.Namespace, reason: str) -> int:
    line = f"no GPU here: {reason}; nothing to check"
    if args.json:
        emit_json({"gpu": False, "line": line, "reason": reason, "checks": []})
    else:
        say(line)
    return EXIT_OK


def _target(devices: tuple[GpuReading, ...], index: str | None) -> GpuReading:
    if index is None:
        return devices[0]
    for device in devices:
        if device.index == index:
            return device
    raise CliError(f"--gpu {index}: no such GPU (NVML sees {', '.join(d.index for d in devices)})", EXIT_USAGE)


def _windows(sampler: GpuSampler, index: str, count: int, interval_s: float) -> list[GpuReading]:
    """`count` consecutive NVML windows of `interval_s` for one device."""
    readings = []
    for _ in range(count):
        time.sleep(interval_s)
        readings.extend(d for d in sampler.sample().devices if d.index == index)
    return readings


def _drive(args: argparse.Namespace, sampler: GpuSampler, target: GpuReading) -> tuple[Load, list[GpuReading]]:
    """Run the load and sample it: what it did by its own count, and the NVML windows while it ran."""
    count = max(1, round(args.seconds / args.interval))

    def sample_under_load() -> list[GpuReading]:
        sampler.sample()  # ends the window that spans the load's start
        return _windows(sampler, target.index, count, args.interval)

    if args.no_load:
        return NoLoad("--no-load: nothing drives the GPU"), []
    if args.url:
        return _decode(args, sample_under_load)
    if not torch_installed():
        return NoLoad(f"torch is not installed here and no --url was given: {NO_LOAD_HINT}"), []
    try:
        with CopyLoad(target.uuid, args.seconds + args.interval + COPY_MARGIN_S, args.copy_mib) as copy:
            loaded = sample_under_load()
            return copy.result(), loaded
    except LoadFailed as error:
        return NoLoad(str(error), failed=True), []


def _decode(args: argparse.Namespace, sample_under_load: Callable[[], list[GpuReading]]
            ) -> tuple[Load, list[GpuReading]]:
    """Decode on the server --url names, through phasetop's load runner (imported here: the copy path needs none
    of it)."""
    from tui.cli.common import base_url, settings_from
    from tui.sources import loop
    from tui.sources.detect import describe_configured
    from tui.sources.errors import SourceError
    from tui.sources.http import client_for
    from tui.sources.workloads.decode_load import DecodePlan, decode_during

    settings = settings_from(args)
    plan = DecodePlan(args.streams, args.prompt_tokens, args.max_tokens)

    async def decode():
        async with client_for(settings, base_url(settings.url), args.streams + 2) as client:
            server = await describe_configured(client, settings.api, settings.model)
            return await decode_during(client, server, plan, sample_under_load)

    try:
        loaded, run_ = loop.run(decode())
    except SourceError as error:
        return NoLoad(f"decode on {base_url(settings.url)} did not run: {error}", failed=True), []
    return run_, loaded


def _binding_version() -> str | None:
    try:
        return version("nvidia-ml-py")
    except PackageNotFoundError:
        return None


def _user() -> tuple[str, bool]:
    """Who runs the check, as GPM's permission depends on it."""
    uid = os.geteuid()
    try:
        import pwd

        name = pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        name = None
    return (f"uid {uid}, {name}" if name else f"uid {uid}"), uid == 0


def _document(checks: list[Check], load: Load, idle: list[GpuReading], loaded: list[GpuReading],
              versions: dict, device: GpuReading, interval_s: float) -> dict:
    return {
        "gpu": True,
        "device": device.to_json(),
        "versions": {**versions, "nvidia_ml_py": _binding_version()},
        "interval_s": interval_s,
        "load": load.to_json(),
        "checks": [c.to_json() for c in checks],
        "summary": summary_line(checks),
        "failed": any(c.verdict == "fail" for c in checks),
        "samples": {"idle": [r.to_json() for r in idle], "load": [r.to_json() for r in loaded]},
    }


if __name__ == "__main__":
    sys.exit(main())
