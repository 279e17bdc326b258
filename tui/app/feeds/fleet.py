"""Reading the fleet through Prometheus every few seconds (one `read_fleet` per poll, posted as a fact), and whether
an instance answers from here before its main screen opens."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from textual.message import Message

from tui.app.fleet_messages import FleetRead, FleetUnreadable
from tui.config import Settings
from tui.core.fleet.instances import FleetRow
from tui.core.fleet.gpus import JoinRules
from tui.core.fleet.promql import Matcher
from tui.core.untrusted import one_line, without_credentials
from tui.sources import reach
from tui.sources.prometheus import PrometheusError, prometheus_client, read_fleet

Post = Callable[[Message], object]

FLEET_INTERVAL_S = 2.0
"""Seconds between reads: a read is some thirty queries (0.2 s on the fleet lab); Prometheus scrapes every 15 s
in most fleets, so a faster poll would show nothing new."""


async def poll_fleet(settings: Settings, url: str, matchers: Sequence[Matcher], reading: int, post: Post,
                     interval_s: float = FLEET_INTERVAL_S) -> None:
    """Read the fleet every `interval_s`; a Prometheus that fails is asked again at the same pace."""
    config = settings.prometheus
    rules = JoinRules(config.dcgm_host_label, config.instance_host_label)
    async with prometheus_client(settings, url) as client:
        while True:
            started = time.monotonic()
            try:
                fleet = await read_fleet(client, matchers, rules, config.role_label, config.window_s, config.lookback_s)
            except PrometheusError as error:
                post(FleetUnreadable(str(error), time.time(), reading))
            except Exception as error:  # an answer the core could not read: one line on screen, the poll goes on
                post(FleetUnreadable(f"fleet not read: {type(error).__name__}: {one_line(error, 200)}", time.time(), reading))
            else:
                post(FleetRead(fleet, reading, started))
            await asyncio.sleep(max(0.0, interval_s - (time.monotonic() - started)))


async def unreachable_line(row: FleetRow) -> str | None:
    """One line when nothing answers at the row's server from here (its main screen opens anyway: its metrics come
    through Prometheus), else None."""
    if await reach.accepts(row.url):
        return None
    down = " (Prometheus has it down)" if row.status == "down" else ""
    return (f"{one_line(row.key, 60)}: nothing answers at {one_line(without_credentials(row.url), 80)} from here{down}: "
            "its metrics come through Prometheus, sends wait until it answers")
