"""The measurement guard read from a server: whether it was fresh, its decode ceiling before a run, and after one
the tokens a step it speculated at (`tui.core.measure.delivery.Guard` judges the requests by them)."""

from __future__ import annotations

from tui.core.measure.delivery import Guard
from tui.sources.ceiling import server_decode_ceiling
from tui.sources.detect import ServerInfo
from tui.sources.errors import SourceError
from tui.sources.http import ServerClient
from tui.sources.identity import server_is_fresh
from tui.sources.scrape import MetricsScraper


async def guard_for(client: ServerClient, server: ServerInfo, bandwidth_gbs: float | None) -> Guard:
    """The guard before the first request (its /metrics counters; its identity on this host's devices): the one way a
    command builds one (the UI's is its live session's)."""
    ceiling = await server_decode_ceiling(client, server, bandwidth_gbs)
    return Guard(await server_is_fresh(client), ceiling.decode_ceiling_tok_s)


async def with_speculation(guard: Guard, client: ServerClient) -> Guard:
    """The guard after a run, with the tokens a step of a server that speculated (its /metrics since start).
    Unchanged where the server does not speculate or its metrics cannot be read."""
    if guard.bandwidth_ceiling_tok_s is None:
        return guard
    try:
        snapshot = await MetricsScraper(client).read()
    except SourceError:
        return guard
    return guard.speculating(snapshot.speculation.mean_accepted_length if snapshot.speculation is not None else None)
