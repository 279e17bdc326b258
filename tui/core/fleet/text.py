"""The fleet's figures as text, for the `phasetop fleet` table and the fleet screen alike: a missing figure is "–",
a quantile on a bucket edge is the bound it is (≤ the first bucket, ≥ the last finite one).

Every label value, model name and error here came from Prometheus (the targets' own words): each passes
`one_line`, and callers show the result as plain text, never as markup.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from tui.core.filled import filled
from tui.core.fleet.gpus import FleetGpu
from tui.core.fleet.instances import SATURATED_KV_USAGE, Fleet, FleetRow, Latency, Pool
from tui.core.fleet.promql import Matcher, parse_matcher
from tui.core.untrusted import one_line

CELLS = ("instance", "role", "status", "run/wait", "KV", "TTFT p99", "ITL p99", "gen tok/s", "DRAM GB/s", "decode", "engine",
         "model", "host")
"""The columns `row_cells` fills, in the order the fleet screen shows them: the figures first, so an 80-column
terminal shows them beside the instance's name before any scrolling."""
CELL_SORTS = {"instance": "instance", "engine": "engine", "model": "model", "host": "host", "role": "role",
              "status": "status", "run/wait": "running", "KV": "kv", "TTFT p99": "ttft", "ITL p99": "itl",
              "gen tok/s": "gen", "DRAM GB/s": "dram", "decode": "decode"}
"""The `SORT_COLUMNS` name each column sorts by."""


def num(value: float | None, spec: str = ".0f", unit: str = "") -> str:
    return "–" if value is None else f"{value:{spec}}{unit}"


def seconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value * 1e3:.0f} ms" if value < 1 else f"{value:.2f} s"


def quantile_text(latency: Latency, name: str) -> str:
    """A quantile, or the bound it is when it sits on a bucket edge (≤ the first bucket, ≥ the last finite one)."""
    edge = latency.edges.get(name)
    if edge == "first":
        return f"≤{seconds(latency.first_le)}"
    if edge == "last":
        return f"≥{seconds(latency.last_le)}"
    return seconds(getattr(latency, f"{name}_s"))


def row_cells(r: FleetRow) -> dict[str, str]:
    """One row's cells by column name (`CELLS`), each one line."""
    kv = num(r.kv_cache_usage * 100 if r.kv_cache_usage is not None else None, ".0f", "%")
    dram = num(r.dram_gbs, ",.0f")
    if r.dram_pct_of_peak is not None:
        dram += f" ({r.dram_pct_of_peak:.0f}%)"
    status = r.status + (f" ×{r.restarts}" if r.status == "restarted" and r.restarts else "")
    return {"instance": one_line(r.key, 40), "engine": one_line(r.engine or "–", 12), "model": one_line(r.model or "–", 36),
            "host": one_line(r.host or "–", 30), "role": one_line(r.role or "–", 12), "status": status,
            "run/wait": f"{num(r.running)}/{num(r.waiting)}", "KV": kv, "TTFT p99": quantile_text(r.ttft, "p99"),
            "ITL p99": quantile_text(r.itl, "p99"), "gen tok/s": num(r.generation_tok_s, ",.1f"), "DRAM GB/s": dram,
            "decode": num(r.decode_pct_of_ceiling, ".0f", "%")}


def pool_line(pool: Pool, width: int | None = None) -> str:
    """The pool's figures, on lines of `width` broken only between figures (None: one line)."""
    clauses = [f"{one_line(pool.role, 20)} pool ({len(pool.instances)}): running {num(pool.running)}",
               f"waiting {num(pool.waiting)}", f"prompt {num(pool.prompt_tok_s, ',.0f')} tok/s",
               f"generation {num(pool.generation_tok_s, ',.1f')} tok/s", f"TTFT p99 {quantile_text(pool.ttft, 'p99')}",
               f"ITL p99 {quantile_text(pool.itl, 'p99')}"]
    return filled([(clause + ("," if n < len(clauses) - 1 else ""), " ") for n, clause in enumerate(clauses)], width)


def kv_transfer_line(fleet: Fleet) -> str | None:
    if fleet.kv_transfer_tok_s is None:
        return None
    return f"KV transfer into the decode pool: {fleet.kv_transfer_tok_s:,.0f} prompt tok/s"


def merged_text(fleet: Fleet) -> str:
    """The whole fleet's p99s: quantiles of the summed bucket rates, never an average of the instances'."""
    merged = fleet.merged
    return f"fleet: TTFT p99 {quantile_text(merged['ttft'], 'p99')}, ITL p99 {quantile_text(merged['itl'], 'p99')}"


def saturated_text(fleet: Fleet) -> str | None:
    if not fleet.saturated:
        return None
    return f"saturated (waiting, or KV ≥ {SATURATED_KV_USAGE * 100:.0f} %): {', '.join(one_line(k, 60) for k in fleet.saturated)}"


def slowest_text(fleet: Fleet) -> str | None:
    return f"slowest (ITL p99): {one_line(fleet.slowest, 60)}" if fleet.slowest else None


def gpu_line(g: FleetGpu) -> str:
    """One GPU as DCGM reports it: where, which, DRAM active as GB/s of its peak, SM and tensor activity, memory used."""
    name = one_line(g.device or g.model_name or "unknown GPU", 40)
    dram = num(g.dram_active * 100 if g.dram_active is not None else None, ".0f", "%")
    if g.dram_gbs is not None:
        dram += f" = {g.dram_gbs:,.0f} of {g.peak_gbs:,.0f} GB/s"
    used = num(g.fb_used_mib / 1024 if g.fb_used_mib is not None else None, ",.1f", " GiB")
    return (f"{one_line(g.host or '?', 30)} GPU {one_line(g.gpu, 8)} {name}: DRAM active {dram}, "
            f"SM {num(g.sm_active * 100 if g.sm_active is not None else None, '.0f', '%')}, "
            f"tensor {num(g.tensor_active * 100 if g.tensor_active is not None else None, '.0f', '%')}, {used} used")


def down_lines(rows: Iterable[FleetRow]) -> list[str]:
    """A line per instance down, with Prometheus's last scrape error for it."""
    return [f"{one_line(r.key, 60)} down: {one_line(r.last_error, 160)}" for r in rows if r.status == "down" and r.last_error]


def parse_filter(text: str) -> tuple[Matcher, ...]:
    """A filter as typed: matchers separated by spaces (`role=decode job=~"vllm.*"`, quotes around a value with
    spaces), each as `parse_matcher` reads it. ValueError names what is not a matcher."""
    try:
        words = shlex.split(text)
    except ValueError as error:
        raise ValueError(f"{one_line(text, 80)!r}: {error}") from None
    return tuple(parse_matcher(word) for word in words)
