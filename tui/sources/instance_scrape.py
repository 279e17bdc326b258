"""One instance's /metrics read through Prometheus instead of from the server: for the fleet's rows, whose servers
Prometheus reaches and this host may not.

Prometheus answers an instant query with each series' last scraped value; `timestamp(up)` says when that scrape
was. The reading is stamped with the scrape's time, not the query's, so rates and windows span what the server
did between scrapes; a query before the next scrape returns the last snapshot again rather than a zero rate."""

from __future__ import annotations

import time

import httpx

from tui.core.fleet.promql import Matcher, exposition, selector
from tui.sources.prometheus import PrometheusError, query
from tui.sources.scrape import MetricsScraper


class InstanceScraper(MetricsScraper):
    """`MetricsScraper` over Prometheus: the series of target (`job`, `instance`), through `prometheus`; `client`
    (the instance's own) only for /v1/models, where it answers."""

    def __init__(self, prometheus: httpx.AsyncClient, job: str, instance: str, client: httpx.AsyncClient,
                 window_s: float | None = None) -> None:
        super().__init__(client, window_s)
        self._prometheus = prometheus
        self._target = (Matcher("job", "=", job), Matcher("instance", "=", instance))

    @property
    def _url(self) -> str:
        return f"{self._prometheus.base_url} ({selector('', self._target)})"

    async def _read_text(self) -> tuple[str, tuple[float, float]]:
        at = time.time()
        scraped = await query(self._prometheus, f"timestamp({selector('up', self._target)})", at)
        if not scraped:
            raise PrometheusError(f"Prometheus has no target {selector('', self._target)}")
        up = await query(self._prometheus, selector("up", self._target), at)
        if not up or up[0][1] != 1:
            raise PrometheusError(f"Prometheus: target {selector('', self._target)} is down (up == 0)")
        samples = await query(self._prometheus, selector("", self._target), at)
        scraped_at = scraped[0][1]
        return exposition(samples), (scraped_at, scraped_at)
