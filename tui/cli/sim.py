"""`phasetop sim`: the embedded simulator, a vLLM- (or Ollama-) compatible server timed by the roofline."""

from __future__ import annotations

import argparse
import os
from collections.abc import Coroutine

from tui.cli.commands import COMMANDS
from tui.cli.common import settings_from
from tui.cli.options import add_json_option, port_number
from tui.cli.output import EXIT_OK, EXIT_USAGE, CliError, emit_json, note, say
from tui.core.experiments.disaggregation import DEFAULT_KV_LINK, KV_LINKS, link_of_rate
from tui.core.hardware.devices import UnknownDeviceError, find_device
from tui.core.hardware.models import MODELS, find_model
from tui.core.urls import bad_url
from tui.net import bind, url_of
from tui.sim.blocks import BLOCK_SIZE
from tui.sim.options import QUANTIZATION_BITS, READY_PREFIX, WORKER_PREFIX, SimOptions, served_name
from tui.sim.speculation import DEFAULT_SPECULATIVE_TOKENS, METHODS, Speculation, SpeculationError, speculation_of
from tui.sim.step_cost import ConfigError, EngineConfig
from tui.sources import loop

DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048
"""With chunked prefill on. vLLM V1 picks 8192 for online serving on big GPUs; 2048 is the value its
tuning guide names for good inter-token latency, and the one the domain text discusses."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sim",
        help=COMMANDS["sim"],
        description="A real HTTP server on loopback that speaks vLLM's (or Ollama's) wire format, with prefill "
        "and decode timed by the device's bandwidth and FLOPs. With no flags: H100 SXM, the 8B layout at 16 bit "
        "(one stream decodes just under 209 tok/s). Serves until stopped (Ctrl-C).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=8000, help="port (default 8000; 0 picks a free one)")
    parser.add_argument("--gpu", metavar="NAME", help="device preset (default: settings, else 'H100 SXM'; see `phasetop ceiling --list`)")
    parser.add_argument("--model", metavar="NAME", help=f"model preset ({', '.join(MODELS)}) or a config.json path (default 8b)")
    parser.add_argument("--served-model-name", metavar="NAME", help="model id on the wire (default: the preset's Hugging Face id, or Ollama tag)")
    parser.add_argument("--max-num-batched-tokens", type=int, metavar="N",
                        help=f"token budget per engine step (default {DEFAULT_MAX_NUM_BATCHED_TOKENS}; with chunked prefill off, max(max-model-len, 2048))")
    parser.add_argument("--max-num-seqs", type=int, default=256, metavar="N", help="most sequences in one batch (default 256)")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9, metavar="F",
                        help="share of device memory for weights + KV cache (default 0.9)")
    parser.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=True,
                        help="reuse the KV cache of shared prompt prefixes (default on, as vLLM V1)")
    parser.add_argument("--enable-chunked-prefill", action=argparse.BooleanOptionalAction, default=True,
                        help="cut prompts into chunks mixed with decode steps (default on, as vLLM V1)")
    parser.add_argument("--quantization", choices=tuple(QUANTIZATION_BITS), default="none",
                        help="weight format: none = 16 bit, fp8/int8 = 8 bit, int4 = 4 bit (default none)")
    parser.add_argument("--max-model-len", type=int, metavar="N", help="longest prompt + output (default: the model's, capped to what the KV cache holds)")
    parser.add_argument("--api-key", metavar="KEY", help="require `Authorization: Bearer KEY` on /v1 (default: $VLLM_API_KEY, else none)")
    parser.add_argument("--api", choices=("openai", "ollama"), default="openai", help="wire API to serve (default openai, i.e. vLLM)")
    parser.add_argument("--time-scale", type=float, metavar="X", help="multiply every simulated duration (2 = twice as slow; default 1)")
    parser.add_argument("--enable-prompt-tokens-details", action="store_true", help="add prompt_tokens_details.cached_tokens to usage")
    parser.add_argument("--enable-per-request-metrics", action="store_true",
                        help="per-request `metrics` (TTFT, generation time, queue time, mean ITL) on the last chunk, as vLLM's flag")
    parser.add_argument("--enable-mfu-metrics", action="store_true",
                        help="fill vllm:estimated_{flops,read_bytes,write_bytes}_per_gpu_total (0 without, as vLLM)")
    parser.add_argument("--otlp-traces-endpoint", metavar="URL",
                        help="send each finished request's span to this OTLP/HTTP endpoint (protobuf; e.g. "
                        "http://127.0.0.1:4318/v1/traces, `phasetop traces --otlp 4318`), as vLLM's flag does: its "
                        "`llm_request` span with vLLM's attributes, the simulator's exact queue, prefill and decode")
    parser.add_argument("--eos-probability", type=float, default=0.0, metavar="P",
                        help="chance each token is end-of-sequence, seeded per prompt, as a model that can stop "
                        "(default 0: answers run to max_tokens; ignore_eos/min_tokens override it)")
    parser.add_argument("--stream-interval", type=int, default=1, metavar="N",
                        help="tokens gathered into one streamed chunk, as vLLM's flag: the first token at once, then "
                        "every N, and the rest at the end (default 1)")
    sd = parser.add_argument_group("speculative decoding", "K drafted tokens verified a step in one pass of the model")
    sd.add_argument("--speculative", choices=METHODS, metavar="METHOD",
                    help="speculate: ngram (drafts looked up in the prompt, no device time) or draft (a draft model a "
                    "tenth the size runs K passes first); a step's accepted tokens go out in one chunk, and /metrics "
                    "has vLLM's vllm:spec_decode_* counters")
    sd.add_argument("--num-speculative-tokens", type=int, metavar="K", help="drafts a step (default 3)")
    accept = sd.add_mutually_exclusive_group()
    accept.add_argument("--acceptance", type=float, metavar="A",
                        help="chance each draft is accepted, given the ones before it were (default 0.7)")
    accept.add_argument("--acceptance-curve", metavar="A0,A1,…",
                        help="each position's acceptance, K values (falling, as real drafts' do)")
    pd = parser.add_argument_group("disaggregation", "prefill and decode on separate simulated workers")
    pd.add_argument("--disaggregated", action="store_true",
                    help="serve the API as vLLM's disaggregation proxy does, in front of prefill and decode workers, each "
                    "its own device with its own scheduler, KV pool and /metrics (a role label) on its own port, "
                    "printed at start; a request's KV cache moves from its prefill worker to its decode worker")
    pd.add_argument("--prefill-workers", type=int, default=1, metavar="N", help="prefill workers (default 1)")
    pd.add_argument("--decode-workers", type=int, default=1, metavar="M", help="decode workers (default 1)")
    links = pd.add_mutually_exclusive_group()
    links.add_argument("--kv-link", choices=tuple(KV_LINKS), metavar="NAME",
                       help=f"the interconnect the KV moves over: {', '.join(f'{n} {l.gbs:g}' for n, l in KV_LINKS.items())} GB/s "
                       f"(default {DEFAULT_KV_LINK}; with --split-one-device, a copy within the device's memory)")
    links.add_argument("--kv-link-gbs", type=float, metavar="B", help="the interconnect's rate in GB/s instead of a preset")
    pd.add_argument("--split-one-device", action="store_true",
                    help="every worker on one device: its memory divided between them, their steps time-sliced")
    parser.add_argument("--stop-on-stdin-close", action="store_true", help=argparse.SUPPRESS)
    add_json_option(parser)
    parser.set_defaults(handler=run)


def build_options(args: argparse.Namespace) -> SimOptions:
    """The simulator's settings from flags over settings (gpu, model, time scale), checked."""
    settings = settings_from(args, **{"sim.gpu": args.gpu, "sim.model": args.model, "sim.time_scale": args.time_scale})
    try:
        device = find_device(settings.sim.gpu)
        layout = find_model(settings.sim.model)
    except (UnknownDeviceError, ValueError) as error:
        raise CliError(str(error), EXIT_USAGE) from None
    config = EngineConfig(
        device=device,
        layout=layout,
        bits=QUANTIZATION_BITS[args.quantization],
        max_num_seqs=args.max_num_seqs,
        gpu_memory_utilization=args.gpu_memory_utilization,
        enable_prefix_caching=args.enable_prefix_caching,
        enable_chunked_prefill=args.enable_chunked_prefill,
        max_model_len=args.max_model_len,
        speculation=_speculation(args),
    )
    if args.max_model_len is None:
        capacity = config.num_gpu_blocks * BLOCK_SIZE
        if 0 < capacity < layout.max_model_len:
            note(f"phasetop sim: max-model-len capped to {capacity} tokens, all the KV cache holds (set --max-model-len to choose)")
            config = _replace(config, max_model_len=capacity)
    budget = args.max_num_batched_tokens
    if budget is None:
        budget = DEFAULT_MAX_NUM_BATCHED_TOKENS if args.enable_chunked_prefill else max(config.model_len, 2048)
    config = _replace(config, max_num_batched_tokens=budget)
    if not 0 <= args.eos_probability < 1:
        raise CliError("--eos-probability must be in [0, 1)", EXIT_USAGE)
    if args.stream_interval < 1:
        raise CliError(f"--stream-interval must be at least 1, got {args.stream_interval}", EXIT_USAGE)
    if args.stream_interval != 1 and args.api == "ollama":
        raise CliError("--stream-interval is vLLM's flag (Ollama streams every token)", EXIT_USAGE)
    try:
        config.validate()
    except ConfigError as error:
        raise CliError(str(error), EXIT_USAGE) from None
    return SimOptions(
        config=config,
        served_model_name=args.served_model_name or served_name(layout.name, args.api),
        api=args.api,
        api_key=args.api_key or os.environ.get("VLLM_API_KEY") or None,
        time_scale=settings.sim.time_scale,
        enable_prompt_tokens_details=args.enable_prompt_tokens_details,
        enable_per_request_metrics=args.enable_per_request_metrics,
        enable_mfu_metrics=args.enable_mfu_metrics,
        eos_probability=args.eos_probability,
        otlp_traces_endpoint=_traces_endpoint(args.otlp_traces_endpoint),
        stream_interval=args.stream_interval,
    )


def _speculation(args: argparse.Namespace) -> Speculation | None:
    """--speculative and its settings, checked; None without it."""
    if args.speculative is None:
        if args.acceptance is not None or args.acceptance_curve is not None or args.num_speculative_tokens is not None:
            raise CliError("--num-speculative-tokens, --acceptance and --acceptance-curve need --speculative", EXIT_USAGE)
        return None
    if args.api == "ollama":
        raise CliError("--speculative serves vLLM's API only (Ollama does not speculate)", EXIT_USAGE)
    if args.disaggregated:
        raise CliError("--speculative and --disaggregated do not run together here", EXIT_USAGE)
    try:
        curve = tuple(float(v) for v in args.acceptance_curve.split(",")) if args.acceptance_curve else None
        k = DEFAULT_SPECULATIVE_TOKENS if args.num_speculative_tokens is None else args.num_speculative_tokens
        return speculation_of(args.speculative, k, args.acceptance, curve)
    except ValueError as error:  # SpeculationError, or a curve value that is no number
        message = str(error) if isinstance(error, SpeculationError) else f"--acceptance-curve: {error}"
        raise CliError(message, EXIT_USAGE) from None


def _traces_endpoint(url: str | None) -> str | None:
    """--otlp-traces-endpoint as given: an http(s) URL (vLLM's gRPC `host:port` form is not spoken here)."""
    if url is None:
        return None
    problem = bad_url(url)
    if problem:
        raise CliError(f"--otlp-traces-endpoint: {problem} (OTLP/HTTP: http://HOST:PORT/v1/traces)", EXIT_USAGE)
    return url


def _replace(config: EngineConfig, **changes) -> EngineConfig:
    from dataclasses import replace

    return replace(config, **changes)


def run(args: argparse.Namespace) -> int:
    from tui.sim.serve import serve  # the server stack loads only to serve, not with every `phasetop` parser

    options = build_options(args)
    if args.disaggregated:
        return _run_disaggregated(args, options)
    if args.split_one_device or args.kv_link or args.kv_link_gbs is not None:
        raise CliError("--kv-link, --kv-link-gbs and --split-one-device need --disaggregated", EXIT_USAGE)
    try:
        sock = bind(args.host, args.port)
    except OSError as error:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {error.strerror or error}") from None

    def ready(url: str) -> None:
        config = options.config
        if args.json:
            emit_json({"url": url, "api": options.api, "model": options.served_model_name, **options.sim_info(),
                       "num_gpu_blocks": config.num_gpu_blocks})
        else:
            say(f"{READY_PREFIX}{url}")
        note(f"phasetop sim: {config.device.name}, {config.layout.name} at {config.bits} bit as "
             f"{options.served_model_name!r}; {config.num_gpu_blocks} KV blocks; Ctrl-C stops")

    return _serve_until_stopped(serve(options, sock, ready, stop_on_stdin_close=args.stop_on_stdin_close))


def _run_disaggregated(args: argparse.Namespace, options: SimOptions) -> int:
    """Bind the front on --port and each worker on a free port of --host; print the workers, then the ready line."""
    from tui.sim.disaggregated import disaggregated_options, serve_disaggregated

    try:
        link = link_of_rate(args.kv_link_gbs) if args.kv_link_gbs is not None else KV_LINKS.get(args.kv_link or "")
        layout = disaggregated_options(options, args.prefill_workers, args.decode_workers, link, args.split_one_device)
    except (ConfigError, ValueError) as error:
        raise CliError(str(error), EXIT_USAGE) from None
    try:
        front_sock = bind(args.host, args.port)
        worker_socks = [bind(args.host, 0) for _ in layout.workers]
    except OSError as error:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {error.strerror or error}") from None

    def ready() -> None:
        front, workers = url_of(front_sock), [(name, url_of(sock)) for (name, _), sock in zip(layout.workers, worker_socks)]
        if args.json:
            emit_json({"url": front, "api": options.api, "model": options.served_model_name, **layout.front.sim_info(),
                       "workers": [{"name": name, "role": name.split("-")[0], "url": url} for name, url in workers]})
        else:
            for name, url in workers:
                say(f"{WORKER_PREFIX}{name} listening on {url}")
            say(f"{READY_PREFIX}{front}")
        config = layout.front.config
        note(f"phasetop sim: disaggregated, {len(layout.prefill)} prefill + {len(layout.decode)} decode workers"
             f"{' sharing one ' + config.device.name if layout.split_one_device else ', each a ' + config.device.name}, "
             f"{config.layout.name}; KV over {layout.link.name} ({layout.link.gbs:g} GB/s); {config.num_gpu_blocks} KV blocks "
             f"a worker; Ctrl-C stops")

    return _serve_until_stopped(serve_disaggregated(layout, front_sock, worker_socks, ready,
                                                    lambda transfer: note(transfer.line()),
                                                    stop_on_stdin_close=args.stop_on_stdin_close))


def _serve_until_stopped(serving: Coroutine[object, object, None]) -> int:
    """Serve until Ctrl-C, SIGTERM or stdin closing; Ctrl-C is how a server is stopped, so it exits 0 (uvicorn hands the
    signal it caught back once it has shut down, as a KeyboardInterrupt here)."""
    try:
        loop.run(serving)
    except KeyboardInterrupt:
        note("phasetop sim: stopped")
    return EXIT_OK
