"""`phasetop fleet`: every serving instance a Prometheus knows, one row each, read through its HTTP API."""

from __future__ import annotations

import argparse
import asyncio

from tui.cli.commands import COMMANDS
from tui.cli.common import settings_from
from tui.cli.options import add_json_option
from tui.cli.output import EXIT_OK, EXIT_USAGE, CliError, emit_json, say
from tui.core.fleet.gpus import JoinRules
from tui.core.fleet.instances import NO_INSTANCES, SORT_COLUMNS, Fleet, FleetRow, sort_rows
from tui.core.fleet.promql import parse_matcher
from tui.core.fleet.text import (down_lines, kv_transfer_line, merged_text, pool_line, row_cells, saturated_text,
                                 slowest_text)
from tui.core.untrusted import without_credentials
from tui.sources.prometheus import PrometheusError, prometheus_client, read_fleet

JSON_SHAPE = (
    "--json prints one document: {prometheus, t_unix, read_s, instances: [row], pools: [{role, instances, running, "
    "waiting, kv_cache_usage, prompt_tok_s, generation_tok_s, ttft, itl}], kv_transfer_tok_s, merged: {ttft, itl}, "
    "saturated: [key], slowest: key|null, gpus: [gpu]}; a row is "
    "{key (job/instance), job, instance, host, url, engine, model, role, labels, status (up|down|restarted|unknown), "
    "up, restarts, started_unix, last_error, running, waiting, waiting_by_reason, kv_cache_usage (0-1), prompt_tok_s, "
    "generation_tok_s, generation_tokens_total, prefix_cache_hit_rate, preemptions_per_s, kv_transfer_tok_s, "
    "ttft, itl, gpus, gpu_shared_by, dram_gbs, peak_gbs, "
    "dram_pct_of_peak, decode_ceiling_tok_s, ceiling_line, decode_pct_of_ceiling, saturated, source_names}; a gpu is "
    "{host, gpu, uuid, model_name, device, peak_gbs, dram_active, dram_gbs, fb_used_mib, sm_active, tensor_active}; "
    "a latency (ttft, itl) is {p50_s, p99_s, mean_s, edges: {p50|p99: first|last}, first_le, last_le, source}, "
    "merged ones (pools, fleet) the quantiles of summed bucket rates. Missing series are null."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fleet",
        help=COMMANDS["fleet"],
        description="Read a fleet through Prometheus's HTTP API (never by scraping the servers): the instances are "
        "the targets exporting an engine's metric families over the lookback; per instance running, waiting, KV "
        "usage, prompt and generation tok/s and TTFT/ITL p50/p99 over rate(…[window]) (a quantile on a bucket edge "
        "shows as a bound), prefix-cache hits, preemptions/s, restarts (process_start_time_seconds changed) and up; "
        "the GPUs on its host from dcgm-exporter (DCGM_FI_PROF_DRAM_ACTIVE × the device's peak = GB/s; joined on "
        "DCGM's Hostname and the instance's host, prometheus.dcgm_host_label and prometheus.instance_host_label "
        "change the rule), and one stream's decode rate as a % of the model's ceiling. Instances with a role "
        "(--role-label, or a KV connector's inflow: decode) are pooled; the fleet's and each pool's p99 are "
        "quantiles of summed bucket rates. Credentials: prometheus.bearer_token, or prometheus.username and "
        "prometheus.password (PHASETOP_PROMETHEUS__BEARER_TOKEN, …). " + JSON_SHAPE,
    )
    parser.add_argument("--prometheus", metavar="URL", help="Prometheus base URL (default: settings' prometheus.url)")
    parser.add_argument("--label-filter", action="append", default=[], metavar="K=V",
                        help="only instances whose series match (K=V, K!=V, K=~RE, K!~RE; repeatable; target labels such as job)")
    parser.add_argument("--sort", choices=tuple(SORT_COLUMNS), default="instance",
                        help="order rows by a column: numbers largest first, no data last (default instance)")
    parser.add_argument("--role-label", metavar="NAME", help="a label naming each instance's role (prefill, decode) for the pools")
    parser.add_argument("--timeout", type=float, dest="timeout_s", metavar="S", help="longest wait for one answer, seconds (default 30)")
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args, **{"prometheus.url": args.prometheus, "prometheus.role_label": args.role_label})
    config = settings.prometheus
    try:
        matchers = [parse_matcher(text) for text in args.label_filter]
    except ValueError as error:
        raise CliError(str(error), EXIT_USAGE) from None
    rules = JoinRules(config.dcgm_host_label, config.instance_host_label)
    if not config.url:
        raise CliError("no Prometheus URL: give --prometheus URL or set prometheus.url", EXIT_USAGE)

    async def read() -> Fleet:
        async with prometheus_client(settings) as client:
            return await read_fleet(client, matchers, rules, config.role_label, config.window_s, config.lookback_s)

    try:
        fleet = asyncio.run(read())
    except PrometheusError as error:
        raise CliError(str(error)) from None
    rows = sort_rows(fleet.instances, args.sort)
    if args.json:
        document = fleet.to_json()
        document["instances"] = [r.to_json() for r in rows]
        emit_json({"prometheus": without_credentials(config.url), **document})
    else:
        say(format_fleet(fleet, rows))
    return EXIT_OK


COLUMNS = ("instance", "engine", "model", "role", "status", "run/wait", "KV", "TTFT p99", "ITL p99", "gen tok/s", "DRAM GB/s",
           "decode")


def format_fleet(fleet: Fleet, rows: list[FleetRow]) -> str:
    """A table for a person, then the pools, the merged p99s and the callouts."""
    if not rows:
        return NO_INSTANCES
    table = [COLUMNS] + [tuple(cells[c] for c in COLUMNS) for cells in map(row_cells, rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table]
    lines += [pool_line(pool) for pool in fleet.pools]
    lines.append(kv_transfer_line(fleet))
    lines.append(f"{merged_text(fleet)} (quantiles of the summed bucket rates); read in {fleet.read_s or 0:.2f} s")
    lines += [saturated_text(fleet), slowest_text(fleet), *down_lines(rows)]
    return "\n".join(line for line in lines if line)
