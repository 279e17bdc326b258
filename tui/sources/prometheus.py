"""Prometheus's HTTP API read with httpx: instant and range queries, series, targets, label values, and the fleet.

phasetop never scrapes a fleet's targets itself: Prometheus holds the time series, and every figure is a
query. A failure of any kind (nothing listening, 5xx, 401, an answer that is not Prometheus's JSON, a query
Prometheus refuses) is a `PrometheusError` whose text is one line naming what happened.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import httpx

from tui.core.fleet import promql, queries as fleet_queries
from tui.core.fleet.instances import Fleet, read_fleet_results
from tui.core.fleet.gpus import JoinRules
from tui.core.fleet.queries import Sample, Want
from tui.core.fleet.promql import Matcher
from tui.core.untrusted import one_line, without_credentials
from tui.sources.errors import SourceError, from_httpx
from tui.sources.http import BodyLimits, ServerClient, make_client

if TYPE_CHECKING:
    from tui.config import Settings

MAX_CONNECTIONS = 16
"""Queries in flight at once: a fleet read is some thirty queries, and Prometheus evaluates them in parallel."""


class PrometheusError(SourceError):
    """Prometheus could not be asked, or did not answer a query; one line."""


def prometheus_client(settings: Settings, url: str | None = None) -> ServerClient:
    """A client for the settings' Prometheus (or `url`): its bearer token or basic auth, the settings' timeout.

    Its answers may be as large as a /metrics page (a fleet's bucket rates, its targets), not just a JSON document's cap.
    """
    config = settings.prometheus
    base = url or config.url
    if not base:
        raise PrometheusError("no Prometheus URL: give --prometheus URL or set prometheus.url")
    limits = BodyLimits(settings.limits.metrics_max_bytes, settings.limits.metrics_max_bytes, settings.limits.line_max_bytes)
    client = make_client(base, config.bearer_token, settings.timeout_s, MAX_CONNECTIONS, limits)
    basic = config.basic_credentials()
    if basic is not None:
        client.headers["Authorization"] = f"Basic {basic}"
    return client


async def _api(client: httpx.AsyncClient, path: str, params: dict | None = None, form: dict | None = None) -> object:
    """`data` of one API answer; PrometheusError for anything else."""
    where = without_credentials(f"{client.base_url}{path}")
    try:
        if form is not None:
            response = await client.post(path, data=form)
        else:
            response = await client.get(path, params=params)
    except httpx.HTTPError as error:
        raise PrometheusError(f"Prometheus: {from_httpx(error, where)}") from None
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    if response.status_code in (401, 403):
        raise PrometheusError(f"Prometheus: {where}: HTTP {response.status_code}, the credentials are missing or wrong "
                              "(set prometheus.bearer_token, or prometheus.username and prometheus.password)")
    if isinstance(body, dict) and body.get("status") == "error":
        raise PrometheusError(f"Prometheus: {where}: {one_line(body.get('errorType', 'error'), 40)}: {one_line(body.get('error', ''))}")
    if response.status_code >= 300:
        raise PrometheusError(f"Prometheus: {where}: HTTP {response.status_code}"
                              + (f": {one_line(response.text, 120)}" if response.text.strip() else ""))
    if not isinstance(body, dict) or body.get("status") != "success" or "data" not in body:
        start = one_line(response.text, 40) if response.text.strip() else "an empty body"
        raise PrometheusError(f"Prometheus: {where}: not a Prometheus API answer (it begins {start!r})")
    return body["data"]


def _number(text: object) -> float:
    """A sample's value as Prometheus sends it, a string ("0.5", "NaN", "+Inf")."""
    try:
        return float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")


def _samples(data: object, where: str) -> list[Sample]:
    if not isinstance(data, dict) or data.get("resultType") not in ("vector", "scalar") or "result" not in data:
        raise PrometheusError(f"Prometheus: {where}: not an instant-query answer")
    if data["resultType"] == "scalar":
        return [({}, _number(data["result"][1]))]
    try:
        return [(dict(item.get("metric", {})), _number(item["value"][1])) for item in data["result"]]
    except (KeyError, IndexError, TypeError, AttributeError):
        raise PrometheusError(f"Prometheus: {where}: an instant-query answer of the wrong shape") from None


async def query(client: httpx.AsyncClient, promql_text: str, at_unix: float | None = None) -> list[Sample]:
    """An instant query (POST /api/v1/query): (labels, value) per series; NaN where Prometheus has no number."""
    form = {"query": promql_text, **({"time": f"{at_unix:.3f}"} if at_unix is not None else {})}
    return _samples(await _api(client, "/api/v1/query", form=form), "/api/v1/query")


async def query_range(client: httpx.AsyncClient, promql_text: str, start_unix: float, end_unix: float,
                      step_s: float) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
    """A range query (POST /api/v1/query_range): per series, its labels and (t, value) points, for a chart."""
    form = {"query": promql_text, "start": f"{start_unix:.3f}", "end": f"{end_unix:.3f}", "step": f"{step_s:g}"}
    data = await _api(client, "/api/v1/query_range", form=form)
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        raise PrometheusError("Prometheus: /api/v1/query_range: not a range-query answer")
    try:
        return [(dict(item.get("metric", {})), [(float(t), _number(v)) for t, v in item["values"]]) for item in data["result"]]
    except (KeyError, TypeError, ValueError, AttributeError):
        raise PrometheusError("Prometheus: /api/v1/query_range: a range-query answer of the wrong shape") from None


async def series(client: httpx.AsyncClient, match: str, start_unix: float, end_unix: float) -> list[dict[str, str]]:
    """Label sets of the series `match` selects that had samples between start and end (/api/v1/series)."""
    form = {"match[]": match, "start": f"{start_unix:.3f}", "end": f"{end_unix:.3f}"}
    data = await _api(client, "/api/v1/series", form=form)
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise PrometheusError("Prometheus: /api/v1/series: not a list of label sets")
    return data


async def targets(client: httpx.AsyncClient) -> dict[str, dict[str, str]]:
    """Active targets by `job/instance`: their `scrapeUrl`, `health` and `lastError` (/api/v1/targets)."""
    data = await _api(client, "/api/v1/targets", params={"state": "active"})
    active = data.get("activeTargets") if isinstance(data, dict) else None
    if not isinstance(active, list):
        raise PrometheusError("Prometheus: /api/v1/targets: no list of active targets")
    found = {}
    for target in active:
        labels = target.get("labels") if isinstance(target, dict) else None
        if isinstance(labels, dict):
            key = f"{labels.get('job', '')}/{labels.get('instance', '')}"
            found[key] = {k: str(target.get(k, "")) for k in ("scrapeUrl", "health", "lastError")}
    return found


async def label_values(client: httpx.AsyncClient, label: str) -> list[str]:
    """Every value a label takes (/api/v1/label/<name>/values): e.g. the jobs, for a filter to pick from."""
    Matcher(label, "=", "")  # refuses what is not a label name before it goes into the path
    data = await _api(client, f"/api/v1/label/{label}/values")
    if not isinstance(data, list):
        raise PrometheusError(f"Prometheus: /api/v1/label/{label}/values: not a list of values")
    return [str(v) for v in data]


async def read_fleet(client: httpx.AsyncClient, matchers: Sequence[Matcher] = (), rules: JoinRules = JoinRules(),
                     role_label: str | None = None, window_s: float = 60.0, lookback_s: float = 600.0) -> Fleet:
    """The fleet now: serving instances found by their families' series over `lookback_s`, then every figure's
    query at one evaluation time, concurrently. `matchers` narrow every query (target labels such as
    `job`, `cluster`, a role label match all of an instance's series)."""
    started = time.monotonic()
    now = time.time()
    match = promql.families_match(fleet_queries.family_names(), matchers)
    found, known_targets = await asyncio.gather(series(client, match, now - lookback_s, now), targets(client))
    discovered = fleet_queries.discover(found)
    wants = fleet_queries.plan(discovered.values(), matchers, promql.duration(window_s), promql.duration(lookback_s))
    answers = await asyncio.gather(*(query(client, text, now) for text in wants.values()))
    results: dict[Want, list[Sample]] = dict(zip(wants, answers))
    fleet = read_fleet_results(now, discovered, results, known_targets, rules, role_label)
    return replace(fleet, read_s=time.monotonic() - started)
