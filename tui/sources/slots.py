"""llama.cpp's per-slot state from `GET /slots` (on by default in current builds; `--slots` in old ones)."""

from __future__ import annotations

import httpx

from tui.core.telemetry.slots import SlotState, read_slots
from tui.sources.errors import from_httpx


async def fetch_slots(client: httpx.AsyncClient) -> list[SlotState] | None:
    """The server's slots, or None where it has no /slots (not llama.cpp, or turned off)."""
    try:
        response = await client.get("/slots")
    except httpx.HTTPError as error:
        raise from_httpx(error, f"{client.base_url}/slots") from None
    if response.status_code != 200:
        return None
    try:
        return read_slots(response.json())
    except ValueError:
        return None
