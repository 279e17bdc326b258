"""`phasetop roofline`: where the server's prefill and decode sit under its device's two roofs, measured now."""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass

from tui.cli.commands import COMMANDS
from tui.cli.common import base_url, check_url, meters, settings_from
from tui.cli.options import add_json_option, add_meter_option, add_server_options
from tui.cli.output import EXIT_OK, EXIT_USAGE, CliError, emit_json, say
from tui.config import Settings
from tui.core.hardware.decode_window import gpm_bytes_per_s
from tui.core.measure.delivery import Guard
from tui.core.hardware.devices import Device, UnknownDeviceError, find_device
from tui.core.hardware.models import ModelLayout, find_model
from tui.core.hardware.roofline import measured_point
from tui.core.hardware.roofline_phases import (
    decode_estimate,
    decode_from_streams,
    decode_from_window,
    prefill_estimate,
    prefill_model_point,
    verification,
    window_context,
)
from tui.core.hardware.roofline_target import RooflineTarget
from tui.core.telemetry.speculation import speculation_of
from tui.sources import loop
from tui.sources.detect import ServerInfo, describe_configured
from tui.sources.errors import SourceError
from tui.sources.gpu import GpuSampler
from tui.sources.host import local_port
from tui.sources.http import client_for
from tui.sources.roofline_target import find_roofline_target
from tui.sources.workloads.roofline_probe import DecodeRun, PrefillRun, probe_decode, probe_prefill, warm_up_if_fresh

DEFAULT_PROMPT_TOKENS = 2000
DEFAULT_DECODE_TOKENS = 256
DECODE_PROMPT_TOKENS = 32
"""The decode streams' prompts: short, so their prefill is one step and their KV cache small."""
PREFILL_NO_NVML = "a prefill is shorter than NVML's sampling window, so no measured point"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "roofline",
        help=COMMANDS["roofline"],
        description="Place the server's two phases on its device's roofline: arithmetic intensity (FLOP per byte "
        "read) against achieved FLOP/s, under the flat compute roof and the sloped bandwidth roof. A server with no "
        "traffic has no phase to place, so this sends a short probe: first one request of --prompt-tokens (a fresh "
        "prefix, one token back; its prefill time, the server's own where it reports it, else the time to first "
        "token, gives prefill's point), then --concurrency streams of --decode-tokens at once (their decode, timed "
        "by the server's own counters over a stretch of /metrics readings in which no prompt joined, at the batch "
        "its tokens-per-step histogram or running count gives; where it has no such counters, by the streams' own "
        "timing). Phasetop's points come from the model's layout (FLOPs: 2 × parameters per token plus attention; "
        "bytes: the weights each pass reads plus the KV cache); beside them the server's own estimate where it "
        "publishes one (vLLM's --enable-mfu-metrics) over the same request and stretch, and, for a server on this "
        "host's GPU, decode with NVML's measured DRAM bandwidth (GPM). The device and model are a phasetop "
        "simulator's own; for another server, the model from its id (or --layout) and the device from this host's "
        "GPU (or --gpu).",
    )
    add_server_options(parser)
    parser.add_argument("--gpu", metavar="NAME", help="the server's device preset (default: a simulator's own, else "
                        "this host's GPU holding the server's memory, else the CPU row)")
    parser.add_argument("--layout", metavar="NAME|config.json", help="the served model's layout: a preset or its "
                        "config.json (default: a simulator's own, else the preset its model id names)")
    parser.add_argument("--bits", type=int, choices=(16, 8, 4), help="weight bit width (default: the model id's "
                        "quantization tag, else 16)")
    parser.add_argument("--prompt-tokens", type=int, default=DEFAULT_PROMPT_TOKENS, metavar="N",
                        help=f"the prefill request's prompt (default {DEFAULT_PROMPT_TOKENS})")
    parser.add_argument("--concurrency", type=int, default=1, metavar="C",
                        help="decode streams sent together: the batch decode runs at (default 1)")
    parser.add_argument("--decode-tokens", type=int, default=DEFAULT_DECODE_TOKENS, metavar="K",
                        help=f"tokens each decode stream generates (default {DEFAULT_DECODE_TOKENS})")
    add_meter_option(parser)
    add_json_option(parser)
    parser.set_defaults(handler=run)


@dataclass(frozen=True, slots=True)
class Measured:
    """Everything the probe found, for the output."""

    server: ServerInfo
    target: RooflineTarget
    prefill: PrefillRun
    decode: DecodeRun


def run(args: argparse.Namespace) -> int:
    if args.prompt_tokens < 1 or args.concurrency < 1 or args.decode_tokens < 2:
        raise CliError("--prompt-tokens and --concurrency must be at least 1, --decode-tokens at least 2", EXIT_USAGE)
    device = _device(args.gpu) if args.gpu else None
    layout = _layout(args.layout) if args.layout else None
    settings = settings_from(args)
    check_url(settings.url)
    measured = loop.run(_measure(settings, args, device, layout))
    document = _document(measured, args)
    if args.json:
        emit_json(document)
    else:
        say(_text(document))
    return EXIT_OK


def _device(name: str) -> Device:
    try:
        return find_device(name)
    except UnknownDeviceError as error:
        raise CliError(str(error), EXIT_USAGE) from None


def _layout(name: str) -> ModelLayout:
    try:
        return find_model(name)
    except ValueError as error:
        raise CliError(str(error), EXIT_USAGE) from None


async def _measure(settings: Settings, args: argparse.Namespace, device: Device | None,
                   layout: ModelLayout | None) -> Measured:
    base = base_url(settings.url)
    try:
        async with client_for(settings, base) as client:
            server = await describe_configured(client, settings.api, settings.model)
            target = await _target(client, server, args, device, layout)
            gpu = GpuSampler(local_port(server.url)) if target.device_source == "NVML" else None
            with meters(settings, "roofline", args.concurrency) as meter_for:
                meter = meter_for(client)
                await warm_up_if_fresh(client, server, meter, settings.exact_length)
                prefill = await probe_prefill(client, server, meter, args.prompt_tokens, settings.exact_length)
                if gpu is not None:
                    await asyncio.to_thread(gpu.open)
                try:
                    decode = await probe_decode(client, server, meter, args.concurrency, DECODE_PROMPT_TOKENS,
                                                args.decode_tokens, settings.exact_length, gpu)
                finally:
                    if gpu is not None:
                        await asyncio.to_thread(gpu.close)
    except SourceError as error:
        raise CliError(str(error)) from None
    failed = next((t for t in decode.timings if not t.ok), None)
    if failed is not None:
        raise CliError(f"a decode stream failed: {failed.error}")
    return Measured(server, target, prefill, decode)


async def _target(client, server: ServerInfo, args: argparse.Namespace, device: Device | None,
                  layout: ModelLayout | None) -> RooflineTarget:
    """A simulator's own device and model (what the user names wins); else the model id on this host's GPU."""
    target = await find_roofline_target(client, server, device=device, layout=layout, bits=args.bits)
    if isinstance(target, str):
        raise CliError(target, EXIT_USAGE)
    if args.bits is not None and target.device_source == "simulator flags":
        raise CliError("--bits: a simulator's bit width is its own (restart it with --bits)", EXIT_USAGE)
    return target


def _document(m: Measured, args: argparse.Namespace) -> dict:
    roofs = m.target.roofs
    return {
        "server": m.server.to_json(),
        "target": m.target.to_json(),
        **roofs.to_json(),
        "prefill": _prefill(m),
        "decode": _decode(m),
        "probe": {"prompt_tokens": args.prompt_tokens, "concurrency": args.concurrency,
                  "decode_tokens": args.decode_tokens, "decode_prompt_tokens": DECODE_PROMPT_TOKENS},
    }


def _prefill(m: Measured) -> dict:
    run = m.prefill
    point = prefill_model_point(m.target, run.prompt_tokens, run.prefill_s, run.cached_tokens)
    estimate, why = prefill_estimate(m.target, run.before, run.after, run.prompt_tokens, run.prefill_s)
    return {
        **point.to_json(),
        "reason": None,
        "prompt_tokens": run.prompt_tokens,
        "cached_tokens": run.cached_tokens,
        "prefill_s": run.prefill_s,
        "prefill_s_source": "the server's own split" if run.prefill_source == "server" else "time to first token",
        "chunk_tokens": m.target.chunk_tokens,
        "server_estimate": estimate.to_json() if estimate else None,
        "server_estimate_reason": why,
        "measured": None,
        "measured_reason": PREFILL_NO_NVML,
    }


def _decode(m: Measured) -> dict:
    run = m.decode
    window = run.window
    speculation = speculation_of(run.readings[0].counters, run.readings[-1].counters) if run.readings else None
    tokens_a_step = verification(speculation)[1]
    guard = Guard(bandwidth_ceiling_tok_s=m.target.roofs.peak_bytes_per_s / m.target.weight_bytes,
                  tokens_per_step=tokens_a_step)
    if window is not None:
        context = window_context(window, _mean_prompt(run), run.readings[0].counters["generation_tokens_total"])
        point, why = decode_from_window(m.target, window, context, speculation), None
        estimate, estimate_why = decode_estimate(m.target, window)
        measured_bps, measured_why = gpm_bytes_per_s(run.gpu_samples, window)
        source = f"timed by the server's counters over a {window.seconds:.2f} s stretch of pure decode"
        extra = {"context_tokens": context, "decode_tok_s": window.decode_tok_s, "window_s": window.seconds,
                 "batch_source": window.batch_source}
    else:
        point, why = decode_from_streams(m.target, guard.flagged(run.timings), speculation)
        estimate_why = measured_why = ("the server has no /metrics" if not run.readings else "the decode ended before "
                                       "two /metrics readings saw it alone (raise --decode-tokens)")
        estimate, measured_bps = None, None
        source = "timed by the streams themselves: the server's counters gave no stretch of pure decode"
        decode_tok_s = sum(t.decode_tok_s or 0 for t in run.timings) if point else None
        extra = {"context_tokens": None, "decode_tok_s": decode_tok_s, "window_s": None,
                 "batch_source": "the streams sent together"}
    measured = measured_point(m.target.roofs, point, measured_bps) if point and measured_bps else None
    return {
        **(point.to_json() | {"reason": None} if point else _no_point(why)),
        **extra,
        "decode_tok_s_source": source,
        "concurrency": run.concurrency,
        "server_estimate": estimate.to_json() if estimate else None,
        "server_estimate_reason": estimate_why,
        "measured": measured.to_json() if measured else None,
        "measured_reason": None if measured else measured_why,
    }


def _mean_prompt(run: DecodeRun) -> float:
    counts = [t.prompt_tokens for t in run.timings if t.prompt_tokens]
    return sum(counts) / len(counts) if counts else run.prompt_tokens


def _no_point(why: str | None) -> dict:
    return {"source": "model", "intensity_flop_per_byte": None, "achieved_flops": None, "roof_flops": None,
            "roof_share": None, "bound": None, "batch": None, "tokens": None, "reading": None, "reason": why}


def _text(d: dict) -> str:
    t = d["target"]
    lines = [
        f"roofline of {t['device']} ({t['device_source']}): compute {d['peak_flops'] / 1e12:,.0f} TFLOP/s, bandwidth "
        f"{d['peak_bytes_per_s'] / 1e9:,.0f} GB/s, ridge {d['ridge_flop_per_byte']:,.0f} FLOP/byte",
        f"{t['model']} at {t['bits']} bit, {t['weight_bytes'] / 1e9:,.2f} GB of weights ({t['model_source']})",
        "",
        f"{'phase':<8} {'source':<16} {'FLOP/byte':>10} {'TFLOP/s':>10} {'roof':>10} {'share':>6}  bound",
    ]
    for phase in ("prefill", "decode"):
        p = d[phase]
        sources = (("phasetop model", p), ("server estimate", p["server_estimate"]), ("NVML measured", p["measured"]))
        for label, point in sources:
            if point and point.get("achieved_flops") is not None:
                lines.append(f"{phase:<8} {label:<16} {point['intensity_flop_per_byte']:>10,.1f} "
                             f"{point['achieved_flops'] / 1e12:>10,.2f} {point['roof_flops'] / 1e12:>10,.2f} "
                             f"{point['roof_share'] * 100:>5.0f}%  {point['bound']}")
    lines.append("")
    pre, dec = d["prefill"], d["decode"]
    lines.append(pre["reading"])
    lines.append(dec["reading"] or f"decode: no point ({dec.get('reason')})")
    lines.append("")
    lines.append(f"prefill: {pre['prompt_tokens']:,} prompt tokens in {pre['prefill_s'] * 1e3:,.1f} ms "
                 f"({pre['prefill_s_source']})")
    if dec["decode_tok_s"] is not None:
        lines.append(f"decode: {dec['concurrency']} stream(s) of {d['probe']['decode_tokens']} tokens, "
                     f"{dec['decode_tok_s']:,.1f} tok/s at batch {dec['batch']:.3g}, {dec['decode_tok_s_source']}; "
                     f"batch from {dec['batch_source']}")
    for phase in ("prefill", "decode"):
        for key in ("server_estimate_reason", "measured_reason"):
            if d[phase][key]:
                lines.append(f"{phase}, no {'server estimate' if key.startswith('server') else 'measured point'}: "
                             f"{d[phase][key]}")
    return "\n".join(lines)
