"""Saved runs: one probe, bench, sweep, traffic window or UI session with the server's identity and config, and two
of them compared.

A run is a plain JSON-ready dict (the shape is in the runs contract), so it round-trips through a
file unchanged. No IO here: `tui.runs_store` reads and writes the files.
"""

from __future__ import annotations

import math
import secrets
from datetime import UTC, datetime
from typing import Any

from tui import __version__
from tui.core.measure.delivery import DELIVERY_NOT_GENERATION
from tui.core.measure.stats import summarize, summarize_with_max
from tui.core.measure.uncertainty import by_block, draw_block_s, judge, once_a_run
from tui.core.runs.schema import MAX_FIGURE, SCHEMA
from tui.core.runs.sent import SENT_PARAM, sent_of, sent_settings, sent_text

UI_KIND = "ui"
"""A UI session's runs: what the app sent to one server process (`tui.core.runs.sessions`)."""
KINDS = ("probe", "bench", "sweep", "traffic", UI_KIND)
SCHEDULE_PARAMS = ("seed",)
"""Params that choose when the same requests arrive, not what they are: a bench draws a random seed each
run, so a different seed is no change of workload (compare lists it apart)."""
NOT_WORKLOAD_PARAMS = ("source", "settings")
"""Params that say who ran it and with which server flags (a tune's), not what ran: the flags are the config diff's."""
BENCH_DOCUMENT_KEYS = frozenset({"server", "params", "figures", "requests"})
"""The keys of the document `bench --save FILE` writes, which `compare` reads as a bench run."""

FIGURES = (
    ("ttft_s", "p50", "TTFT p50", "s"),
    ("ttft_s", "p99", "TTFT p99", "s"),
    ("itl_s", "p50", "ITL p50", "s"),
    ("itl_s", "p99", "ITL p99", "s"),
    ("itl_s", "max", "ITL worst gap", "s"),
    ("tpot_s", "p50", "TPOT p50", "s"),
    ("decode_tok_s", "p50", "decode p50", "tok/s"),
    ("prefill_tok_s", "p50", "prefill p50", "tok/s"),
    ("e2e_s", "p50", "E2E p50", "s"),
)
"""(request field, statistic, label, unit) compared between any two runs."""

BENCH_FIGURES = (
    ("request_throughput", "request throughput", "req/s"),
    ("output_throughput", "output throughput", "tok/s"),
    ("total_token_throughput", "total token throughput", "tok/s"),
    ("request_goodput", "goodput", "req/s"),
)
"""`vllm bench serve`'s throughput names, read from two bench runs' `result`."""
HIGHER_IS_BETTER = frozenset({"tok/s", "req/s"})
"""Units of figures where more is better (every other compared figure is a time: less is)."""


def new_run(
    kind: str,
    params: dict[str, Any],
    server: dict[str, Any],
    requests: list[dict[str, Any]],
    result: dict[str, Any],
    started: datetime,
    finished: datetime,
    requests_sample: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A run record with its schema, id and phasetop's version filled in.

    `params` must hold only the workload flags (never the API key, never settings wholesale).
    `requests_sample`: when `requests` are a sample of the run's (an endless load keeps a bounded one),
    `{"kept": K, "of": M, "method": …, "figures": …}`, saved as the run's `requests_sample`; `result` then
    holds the figures over all M. Absent: `requests` are all of them.
    """
    if kind not in KINDS:
        raise ValueError(f"run kind must be one of {', '.join(KINDS)}, not {kind!r}")
    started, finished = _utc(started), _utc(finished)
    run = {
        "schema": SCHEMA,
        "id": f"{started:%Y%m%d-%H%M%S}-{kind}-{secrets.token_hex(2)}",
        "kind": kind,
        "started": _iso(started),
        "finished": _iso(finished),
        "phasetop_version": __version__,
        "params": dict(params),
        "server": dict(server),
        "requests": list(requests),
        "result": dict(result),
    }
    if requests_sample is not None:
        run["requests_sample"] = dict(requests_sample)
    return run


def run_header(run: dict[str, Any]) -> dict[str, Any]:
    """What a listing shows of a run: id, kind (and its name for a person), times, which server, a one-line summary."""
    server = run.get("server") or {}
    return {
        "id": run.get("id"),
        "kind": run.get("kind"),
        "kind_name": kind_name(run),
        "started": run.get("started"),
        "finished": run.get("finished"),
        "server": {key: server.get(key) for key in ("url", "kind", "model", "version")},
        "summary": _summary_line(run),
    }


def kind_name(run: dict[str, Any]) -> str:
    """A run's kind as a listing names it: a sweep by its experiment ("sweep: concurrency"), a UI session as such."""
    kind, vary = run.get("kind"), (run.get("params") or {}).get("vary")
    if kind == UI_KIND:
        return "UI session"
    if kind == "sweep" and isinstance(vary, str):
        return f"sweep: {vary}"
    return str(kind)


def request_figures(requests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Mean/p50/p90/p99/n of each request figure over the requests that finished and were timed as generation
    (a request flagged `burst` timed its delivery: tui.core.measure.delivery); ITL pools every gap."""
    done = [r for r in requests if r.get("ok") and not r.get("burst")]
    out = {name: summarize(_number(r.get(name)) for r in done).to_json()
           for name in ("ttft_s", "tpot_s", "e2e_s", "decode_tok_s", "prefill_tok_s")}
    out["itl_s"] = summarize_with_max(_number(gap) for r in done for gap in r.get("itl_s") or ())
    return out


def draw_block_of(figures: dict[str, dict[str, Any]]) -> float:
    """How long a stretch of a run is one draw, from its `request_figures` (`tui.core.measure.uncertainty.draw_block_s`)."""
    return draw_block_s(figures["itl_s"]["p50"], figures["ttft_s"]["p50"])


def request_samples(requests: list[dict[str, Any]], name: str, block_s: float) -> list[tuple[float, ...]]:
    """A figure's independent draws (`tui.core.measure.uncertainty`) over the requests `request_figures` counts: the values
    of the requests sent within one block of `block_s` (`draw_block_of`), or the gaps of every stream that ended in
    one. A request with no send time (an older file) is a draw of its own."""
    timed: list[tuple[float, float]] = []
    alone: list[tuple[float, ...]] = []
    for r in requests:
        if not r.get("ok") or r.get("burst"):
            continue
        sent = _number(r.get("t_sent_unix"))
        if name != "itl_s":
            value = _number(r.get(name))
            if value is None:
                continue
            if sent is None:
                alone.append((value,))
            else:
                timed.append((sent, value))
            continue
        gaps = [g for g in map(_number, r.get("itl_s") or ()) if g is not None]
        ttft = _number(r.get("ttft_s"))
        if sent is None or ttft is None:
            alone.append(tuple(gaps))
            continue
        at = sent + ttft
        for gap in gaps:  # a gap ends where the ones before it leave off (the client's own are not among them)
            at += gap
            timed.append((at, gap))
    return by_block(timed, block_s) + [draw for draw in alone if draw]


def _streams(requests: list[dict[str, Any]]) -> int:
    """The requests whose gaps `request_figures` pools."""
    return sum(1 for r in requests if r.get("ok") and not r.get("burst") and r.get("itl_s"))


def run_from_bench_document(document: dict[str, Any], name: str) -> dict[str, Any]:
    """The document `bench --save FILE` writes, as a bench run named `name` (the file's stem), so `compare` takes it."""
    started_unix = _number(document.get("started_unix"))
    started = _iso(datetime.fromtimestamp(started_unix, UTC)) if started_unix is not None and 0 <= started_unix < 1e11 else None
    return {
        "schema": SCHEMA,
        "id": name,
        "kind": "bench",
        "started": started,
        "finished": None,
        "params": document.get("params"),
        "server": document.get("server"),
        "requests": document.get("requests"),
        "result": document.get("figures"),
    }


def is_bench_document(document: object) -> bool:
    """True for what `bench --save FILE` writes (no schema, the bench JSON's keys)."""
    return isinstance(document, dict) and "schema" not in document and BENCH_DOCUMENT_KEYS <= document.keys()


def compare_runs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Run `a` (before) and run `b` (after) side by side: figures with deltas, what config and workload changed
    (`workload_differs`: each difference of kind or workload, in words; a figure then differs for that too)."""
    requests_a, requests_b = a.get("requests") or [], b.get("requests") or []
    before, after = request_figures(requests_a), request_figures(requests_b)
    block_a, block_b = draw_block_of(before), draw_block_of(after)
    figures = [
        {**_figure_row(name, stat, label, unit, before[name][stat], after[name][stat]),
         **judge(request_samples(requests_a, name, block_a), request_samples(requests_b, name, block_b), stat, before[name][stat],
                 after[name][stat], higher_is_better=unit in HIGHER_IS_BETTER,
                 requests=(before[name]["n"] if name != "itl_s" else _streams(requests_a),
                           after[name]["n"] if name != "itl_s" else _streams(requests_b))).to_json()}
        for name, stat, label, unit in FIGURES
    ]
    if a.get("kind") == b.get("kind") == "bench":
        figures += result_figure_rows(a, b, BENCH_FIGURES, "value")
    server_a, server_b = a.get("server") or {}, b.get("server") or {}
    start_a, start_b = server_a.get("process_start_time"), server_b.get("process_start_time")
    workload_a, workload_b = _workloads(a.get("params") or {}, b.get("params") or {})
    params_diff = _diff(workload_a, workload_b, "params")
    return {
        "before": run_header(a),
        "after": run_header(b),
        "figures": figures,
        "config_diff": config_diff(server_a, server_b),
        "params_diff": params_diff,
        "workload_differs": ([f"kind {a.get('kind')} → {b.get('kind')}"] * (a.get("kind") != b.get("kind"))
                             + [f"{row['key']} {_shown(row['before'])} → {_shown(row['after'])}" for row in params_diff]),
        "schedule_diff": _diff(_schedule(a.get("params") or {}), _schedule(b.get("params") or {}), "params"),
        "restarted": None if start_a is None or start_b is None else start_a != start_b,
        "bursts_excluded": {side: sum(1 for r in run.get("requests") or [] if r.get("ok") and r.get("burst"))
                            for side, run in (("before", a), ("after", b))},
    }


def result_figure_rows(a: dict[str, Any], b: dict[str, Any], names: tuple[tuple[str, str, str], ...], stat: str) -> list[dict[str, Any]]:
    """Rows for figures the runs' `result` documents hold (name, label, unit), where either run has one."""
    result_a, result_b = a.get("result") or {}, b.get("result") or {}
    rows = []
    for name, label, unit in names:
        x, y = _number(result_a.get(name)), _number(result_b.get(name))
        if x is not None or y is not None:
            rows.append({**_figure_row(name, stat, label, unit, x, y), **once_a_run(x, y).to_json()})
    return rows


def config_diff(server_a: dict[str, Any], server_b: dict[str, Any]) -> list[dict[str, Any]]:
    """What changed in the server: model, context length, version, engine config, simulator flags and, for a
    server on this host, its command line's flags (vLLM's scheduler settings are in no metric).

    A key that changed the same way in two sources (the simulator's flags and vLLM's cache config
    both carry `enable_prefix_caching`) is listed once.
    """
    rows: list[dict[str, Any]] = []
    seen: set[tuple[str, Any, Any]] = set()
    identity_a = {k: server_a.get(k) for k in ("model", "max_model_len", "version")}
    identity_b = {k: server_b.get(k) for k in ("model", "max_model_len", "version")}
    for source, x, y in (
        ("server", identity_a, identity_b),
        ("simulator_flags", server_a.get("simulator_flags") or {}, server_b.get("simulator_flags") or {}),
        ("engine_config", server_a.get("engine_config") or {}, server_b.get("engine_config") or {}),
        ("command_line", server_a.get("command_flags") or {}, server_b.get("command_flags") or {}),
    ):
        for row in _diff(x, y, source):
            if (row["key"], row["before"], row["after"]) in seen:
                continue
            if source == "command_line" and any(key == row["key"] for key, _, _ in seen):
                continue  # what was typed, where the server's own word on the value is already listed
            seen.add((row["key"], row["before"], row["after"]))
            rows.append(row)
    return rows


def _workloads(a: dict[str, Any], b: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two runs' workload settings, diffed key by key: their flags, and what a UI session sent (`tui.core.runs.sent`)."""
    sent_a, sent_b = sent_settings(sent_of(a), sent_of(b))
    return {**_workload(a), **sent_a}, {**_workload(b), **sent_b}


def _workload(params: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in params.items() if key not in (*SCHEDULE_PARAMS, *NOT_WORKLOAD_PARAMS, SENT_PARAM)}


def _schedule(params: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in params.items() if key in SCHEDULE_PARAMS}


def _diff(x: dict[str, Any], y: dict[str, Any], source: str) -> list[dict[str, Any]]:
    """Keys whose values differ, compared as text ("512" and 512 are the same setting)."""
    rows = []
    for key in sorted(set(x) | set(y)):
        before, after = _text(x.get(key)), _text(y.get(key))
        if before != after:
            rows.append({"key": key, "before": before, "after": after, "source": source})
    return rows


def _figure_row(name: str, stat: str, label: str, unit: str, before: float | None, after: float | None) -> dict[str, Any]:
    delta = after - before if before is not None and after is not None else None
    return {
        "figure": name,
        "stat": stat,
        "label": label,
        "unit": unit,
        "before": before,
        "after": after,
        "delta": delta,
        "delta_pct": 100 * delta / before if delta is not None and before else None,
    }


def _summary_line(run: dict[str, Any]) -> str:
    """"3 requests, TTFT p50 12.3 ms, ITL p50 4.8 ms, decode 208 tok/s", plus what a UI session sent ("3 requests
    sent as short 200 ×3, TTFT …") and a sweep's finding."""
    requests = run.get("requests") or []
    figures = request_figures(requests)
    done = figures["ttft_s"]["n"]
    failed = sum(1 for r in requests if not r.get("ok"))
    bursts = sum(1 for r in requests if r.get("ok") and r.get("burst"))
    # Figures are over the requests timed as generation: those timed in bursts are left out, not failed.
    aside = [f"{failed} failed"] * bool(failed) + [f"{bursts} timed {DELIVERY_NOT_GENERATION}, left out"] * bool(bursts)
    parts = [f"{done} request{'s' if done != 1 else ''}" + (f" ({'; '.join(aside)})" if aside else "")]
    sample = run.get("requests_sample")
    if isinstance(sample, dict) and sample.get("of") is not None and sample.get("kept") != sample.get("of"):
        parts[0] += f" (a sample of {sample.get('kept')} of {sample.get('of')})"
    if sent := sent_of(run.get("params") or {}):
        parts[0] += f" sent as {sent_text(sent)}"
    for name, label, scale, unit, digits in (
        ("ttft_s", "TTFT p50", 1000, "ms", 1),
        ("itl_s", "ITL p50", 1000, "ms", 2),
        ("decode_tok_s", "decode", 1, "tok/s", 1),
    ):
        value = figures[name]["p50"]
        if value is not None:
            parts.append(f"{label} {value * scale:,.{digits}f} {unit}")
    finding = (run.get("result") or {}).get("finding")
    if isinstance(finding, str) and finding:
        parts.append(" ".join(finding.split()))
    return ", ".join(parts)


def _number(value: object) -> float | None:
    """A figure as a float; None for anything else, or for one no measurement makes (inf, NaN, beyond MAX_FIGURE)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    if isinstance(value, int) and abs(value) > MAX_FIGURE:
        return None  # float() of a huge int raises OverflowError
    number = float(value)
    return number if math.isfinite(number) and abs(number) <= MAX_FIGURE else None


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _shown(value: str | None) -> str:
    """A diffed setting in words: "(none)" where a run has none."""
    return "(none)" if value is None else value


def _utc(moment: datetime) -> datetime:
    """In UTC; a naive datetime is taken as local time, as `datetime.astimezone` does."""
    return moment.astimezone(UTC)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
