"""The one place an httpx client is made: base URL, bearer key, timeouts, and a pool that survives stale connections."""

from __future__ import annotations

import httpx
from pydantic import SecretStr

from tui import __version__

STALE_CONNECTION_ERRORS = (httpx.RemoteProtocolError, httpx.ReadError)
"""How a request written into a connection the server had already closed fails: the server's FIN
("Server disconnected without sending a response") or its reset, before any response."""


def make_client(
    base_url: str,
    api_key: SecretStr | None = None,
    timeout_s: float = 30.0,
    max_connections: int = 256,
) -> httpx.AsyncClient:
    """An AsyncClient for one server. The key goes into a header and nowhere else.

    It connects directly: HTTP(S)_PROXY in the environment is not used (a proxy would sit inside every
    TTFT; an explicit transport is also what turns httpx's environment proxies off).
    """
    headers = {"User-Agent": f"phasetop/{__version__}"}
    if api_key is not None and api_key.get_secret_value():
        headers["Authorization"] = f"Bearer {api_key.get_secret_value()}"
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))
    return httpx.AsyncClient(
        base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=ResendOnStaleConnection(max_connections)
    )


class ResendOnStaleConnection(httpx.AsyncBaseTransport):
    """Pooled keep-alive connections, and one resend on a new connection when a reused one was already closed.

    A server may close an idle keep-alive connection whenever it likes (llama-server closes every
    one right after a streamed answer, while announcing keep-alive), and a request written into it
    before the close arrives fails without a response: the server never read it. Only that case is
    sent again, once, on a connection of its own (another pooled one may be just as stale). A
    failure on a new connection, or anything after the response head arrived (a server dying
    mid-answer), is never resent. The caller's `trace` sees the resend too, so a wire clock
    restarts when its body goes out and times its connect.

    Env proxies are not read (an explicit transport turns them off in httpx): phasetop talks to the
    server directly, so timings are the server's.
    """

    def __init__(self, max_connections: int) -> None:
        self._pooled = httpx.AsyncHTTPTransport(
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        )
        self._fresh = httpx.AsyncHTTPTransport(
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=0)
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        watch = _ConnectWatch(request.extensions.get("trace"))
        request.extensions = {**request.extensions, "trace": watch}
        try:
            return await self._pooled.handle_async_request(request)
        except STALE_CONNECTION_ERRORS:
            # A streamed upload could not be sent twice; phasetop's bodies are bytes.
            if watch.opened or not isinstance(request.stream, httpx.ByteStream):
                raise
        return await self._fresh.handle_async_request(request)

    async def aclose(self) -> None:
        await self._pooled.aclose()
        await self._fresh.aclose()


class _ConnectWatch:
    """A `trace` callback that notes whether the request opened a connection, then passes each event on."""

    __slots__ = ("inner", "opened")

    def __init__(self, inner) -> None:
        self.inner = inner
        self.opened = False

    async def __call__(self, event: str, info: dict) -> None:
        if event.startswith("connection.connect_"):
            self.opened = True
        if self.inner is not None:
            await self.inner(event, info)
