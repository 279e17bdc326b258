"""`phasetop ceiling`: the decode ceiling (bandwidth / bytes per token) and the prefill floor."""

from __future__ import annotations

import argparse

from tui.cli.commands import COMMANDS
from tui.cli.common import base_url, check_url, settings_from
from tui.cli.options import add_json_option
from tui.cli.output import EXIT_OK, EXIT_USAGE, CliError, emit_json, say
from tui.config import Settings
from tui.core.hardware.devices import DEVICES, Device, UnknownDeviceError, find_device, seed_table_devices
from tui.core.hardware.models import MODELS, ModelLayout, find_model
from tui.core.hardware.roofline import Ceiling, bytes_per_decode_token, ceiling, decode_ceiling_tok_s
from tui.core.hardware.server_ceiling import ServerCeiling
from tui.sources import loop
from tui.sources.ceiling import server_decode_ceiling
from tui.sources.detect import ServerInfo, describe_configured
from tui.sources.errors import SourceError
from tui.sources.http import client_for


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ceiling",
        help=COMMANDS["ceiling"],
        description="Decode ceiling tok/s = memory bandwidth / bytes read per token (weights at --bits, "
        "plus the KV cache at --context). With no arguments: the domain text's table, row for row.",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--gpu", metavar="NAME", help="device preset (forgiving: H100, h100-sxm, 'H100 SXM')")
    where.add_argument("--bandwidth-gbs", type=float, metavar="B", help="memory bandwidth in GB/s")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--params", type=float, metavar="P", help="parameter count (8e9, or 8 for 8 billion)")
    what.add_argument("--config", dest="model_config", metavar="config.json", help="a model's config.json")
    what.add_argument("--model", metavar="NAME", help=f"model preset ({', '.join(MODELS)})")
    what.add_argument("--url", metavar="URL", help="a running server: the ceiling the UI shows for it (a phasetop simulator's "
                      "own device; else the served model on this host's GPUs or the CPU row, the weights from the model "
                      "id or the size llama.cpp reports; for any server but a simulator, --gpu or --bandwidth-gbs name its "
                      "device instead). Exit 0 "
                      "whenever the server answers; an unknown model or device gives a null ceiling and a line saying why")
    parser.add_argument("--bits", type=int, choices=(16, 8, 4), default=16, help="weight bit width (default 16)")
    parser.add_argument("--context", type=int, default=0, metavar="N", help="tokens of KV cache read per step (default 0)")
    parser.add_argument("--prompt-tokens", type=int, default=2000, metavar="N", help="prompt length for the prefill floor (default 2000)")
    parser.add_argument("--list", action="store_true", help="list the device presets")
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.list:
        return _list_devices(args.json)
    if args.context < 0 or args.prompt_tokens <= 0:
        raise CliError("--context must be ≥ 0 and --prompt-tokens > 0", EXIT_USAGE)
    if args.bandwidth_gbs is not None and args.bandwidth_gbs <= 0:
        raise CliError("--bandwidth-gbs must be > 0", EXIT_USAGE)
    if args.url:
        return _served(args)
    layout = _layout(args)
    params = _params(args.params) if args.params is not None else None
    if args.gpu is None and args.bandwidth_gbs is None:
        rows = [_row(d.name, d.mem_bandwidth_gbs, d.peak_bf16_tflops, layout, params, args) for d in seed_table_devices()]
    elif args.bandwidth_gbs is not None:
        rows = [_row(f"{args.bandwidth_gbs:g} GB/s", args.bandwidth_gbs, None, layout, params, args)]
    else:
        device = _device(args.gpu)
        rows = [_row(device.name, device.mem_bandwidth_gbs, device.peak_bf16_tflops, layout, params, args)]
    if args.json:
        emit_json({"rows": [_row_json(r) for r in rows]})
    else:
        say(_table(rows))
    return EXIT_OK


def _layout(args: argparse.Namespace) -> ModelLayout:
    try:
        if args.model_config:
            return ModelLayout.from_file(args.model_config)
        return find_model(args.model or "8b")
    except ValueError as error:
        raise CliError(str(error), EXIT_USAGE) from None


def _device(name: str) -> Device:
    try:
        return find_device(name)
    except UnknownDeviceError as error:
        raise CliError(str(error), EXIT_USAGE) from None


def _served(args: argparse.Namespace) -> int:
    """`--url`: the running server's ceiling, derived as the UI derives it (`tui.sources.ceiling`).

    --context is counted where the model's layout is known (its KV bytes per token); where it is not,
    asking for it is a usage error rather than a figure that leaves the KV cache out.
    """
    bandwidth_gbs = _device(args.gpu).mem_bandwidth_gbs if args.gpu else args.bandwidth_gbs
    settings = settings_from(args, bandwidth_gbs=bandwidth_gbs)
    check_url(settings.url)
    info, served = loop.run(_server_ceiling(settings))
    at_context = None
    if args.context and served.decode_ceiling_tok_s is not None:
        if served.kv_bytes_per_token is None:
            raise CliError(f"--context needs the model's layout: none is known for {info.model!r}, so its KV cache "
                           "cannot be counted (pass --params/--config and --bits instead of --url)", EXIT_USAGE)
        at_context = decode_ceiling_tok_s(
            served.mem_bandwidth_gbs, bytes_per_decode_token(served.weight_bytes, served.kv_bytes_per_token, args.context))
    if args.json:
        emit_json({
            "server": {"url": info.url, "kind": info.kind, "model": info.model},
            "line": served.line,
            "decode_ceiling_tok_s": served.decode_ceiling_tok_s,
            "mem_bandwidth_gb_s": served.mem_bandwidth_gbs,
            "weight_bytes": served.weight_bytes,
            "kv_bytes_per_token": served.kv_bytes_per_token,
            "cpu_row": served.cpu_row,
            "context": args.context,
            "decode_ceiling_at_context_tok_s": at_context,
        })
        return EXIT_OK
    say(f"{info.url} serves {info.model!r}")
    say(served.line)
    if at_context is not None:
        kv_gb = served.kv_bytes_per_token * args.context / 1e9
        say(f"at {args.context:,} tokens of context (+{kv_gb:,.2f} GB of KV cache a step): {at_context:,.0f} tok/s")
    return EXIT_OK


async def _server_ceiling(settings: Settings) -> tuple[ServerInfo, ServerCeiling]:
    try:
        async with client_for(settings, base_url(settings.url)) as client:
            info = await describe_configured(client, settings.api, settings.model)
            return info, await server_decode_ceiling(client, info, settings.bandwidth_gbs)
    except SourceError as error:
        raise CliError(str(error)) from None


def _params(value: float) -> float:
    """`--params 8` means 8 billion; `--params 8e9` means the same."""
    if value <= 0:
        raise CliError("--params must be > 0", EXIT_USAGE)
    return value * 1e9 if value < 1e6 else value


def _row(name: str, bandwidth: float, tflops: float | None, layout: ModelLayout, params: float | None, args) -> Ceiling:
    return ceiling(
        device=name,
        bandwidth_gbs=bandwidth,
        peak_tflops=tflops,
        layout=layout,
        params=params,
        bits=args.bits,
        context=args.context,
        prefill_tokens=args.prompt_tokens,
    )


def _row_json(row: Ceiling) -> dict:
    return {
        "device": row.device,
        "mem_bandwidth_gb_s": row.mem_bandwidth_gbs,
        "decode_ceiling_tok_s": row.decode_ceiling_tok_s,
        "peak_bf16_tflops": row.peak_bf16_tflops,
        "model": row.model,
        "params": row.params,
        "bits": row.bits,
        "context": row.context,
        "weight_bytes": row.weight_bytes,
        "kv_bytes_per_token": row.kv_bytes_per_token,
        "kv_bytes_at_context": row.kv_bytes_at_context,
        "bytes_per_token": row.bytes_per_token,
        "prefill_tokens": row.prefill_tokens,
        "prefill_floor_s": row.prefill_floor_s,
        "prefill_ceiling_tok_s": row.prefill_ceiling_tok_s,
    }


def _table(rows: list[Ceiling]) -> str:
    first = rows[0]
    kv = f"KV {first.kv_bytes_per_token:,.0f} B/token" if first.kv_bytes_per_token else "KV cache not counted"
    header = (
        f"{first.model}: {first.params / 1e9:.2f}B params at {first.bits:.3g}-bit = {first.weight_bytes / 1e9:.2f} GB; {kv}"
        + (f", {first.kv_bytes_at_context / 1e9:.2f} GB at {first.context:,} tokens" if first.context else "")
    )
    lines = [header, "", f"{'device':<30} {'GB/s':>7} {'decode tok/s':>13} {f'prefill {first.prefill_tokens} tok':>18}"]
    for row in rows:
        floor = f"≥ {row.prefill_floor_s * 1e3:,.1f} ms" if row.prefill_floor_s else "–"
        lines.append(f"{row.device:<30} {row.mem_bandwidth_gbs:>7,.0f} {row.decode_ceiling_tok_s:>13,.0f} {floor:>18}")
    return "\n".join(lines)


def _list_devices(as_json: bool) -> int:
    if as_json:
        emit_json({
            "devices": [
                {"name": d.name, "mem_bandwidth_gb_s": d.mem_bandwidth_gbs, "peak_bf16_tflops": d.peak_bf16_tflops,
                 "memory_gb": d.memory_gb, "aliases": list(d.aliases)}
                for d in DEVICES
            ]
        })
        return EXIT_OK
    say(f"{'device':<30} {'GB/s':>7} {'bf16 TFLOP/s':>13} {'memory GB':>10}  names")
    for d in DEVICES:
        say(f"{d.name:<30} {d.mem_bandwidth_gbs:>7,.0f} {d.peak_bf16_tflops:>13,.0f} {d.memory_gb:>10,.0f}  {', '.join(d.aliases)}")
    return EXIT_OK
