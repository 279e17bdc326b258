"""Whether anything accepts a TCP connection at a server's address: a probe far cheaper than a request.

While a server is down the UI probes it a few times a second, so it sees the server return within a
fraction of a second without sending a full request (or three, for API detection) each time.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

PROBE_TIMEOUT_S = 0.5
"""A connect that takes longer counts as not accepted (a host that drops packets)."""


def address_of(url: str) -> tuple[str, int] | None:
    """(host, port) of an http(s) URL, the scheme's port when none is given; None when it names neither."""
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return (parts.hostname, port) if parts.hostname else None


async def accepts(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True when a TCP connection to the URL's host and port opens within `timeout_s` (it is closed at once)."""
    address = address_of(url)
    if address is None:
        return False
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(*address), timeout_s)
    except (OSError, TimeoutError, UnicodeError):
        return False
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return True
