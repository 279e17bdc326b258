"""The one place an httpx client is made: base URL, bearer key, timeouts."""

from __future__ import annotations

import httpx
from pydantic import SecretStr

from tui import __version__


def make_client(
    base_url: str,
    api_key: SecretStr | None = None,
    timeout_s: float = 30.0,
    max_connections: int = 256,
) -> httpx.AsyncClient:
    """An AsyncClient for one server. The key goes into a header and nowhere else."""
    headers = {"User-Agent": f"phasetop/{__version__}"}
    if api_key is not None and api_key.get_secret_value():
        headers["Authorization"] = f"Bearer {api_key.get_secret_value()}"
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))
    return httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, limits=limits)
