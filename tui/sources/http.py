"""The one place a server's client is made: base URL, bearer key, timeouts, and pools that survive stale connections.

httpx for the JSON calls; token streams go over the aiohttp session it carries (token_wire.py).
"""

from __future__ import annotations

import functools
import ssl
from typing import TYPE_CHECKING

import httpx
from pydantic import SecretStr

from tui import __version__

if TYPE_CHECKING:
    from tui.sources.token_wire import TokenSession

STALE_CONNECTION_ERRORS = (httpx.RemoteProtocolError, httpx.ReadError)
"""How a request written into a connection the server had already closed fails: the server's FIN
("Server disconnected without sending a response") or its reset, before any response."""


class ServerClient(httpx.AsyncClient):
    """An httpx client for one server that also carries the aiohttp session its token streams use.

    The session is made on first use, inside the event loop that streams (aiohttp binds to it), and
    closed with the client.
    """

    def __init__(self, base_url: str, headers: dict[str, str], timeout_s: float, max_connections: int) -> None:
        super().__init__(
            base_url=base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            transport=ResendOnStaleConnection(max_connections),
        )
        self._session_args = (base_url, headers, timeout_s, max_connections)
        self._tokens: TokenSession | None = None

    def tokens(self) -> TokenSession:
        if self._tokens is None:
            # aiohttp loads here, on the first stream: its import (~150 ms, 64 of them its CA bundle) stays
            # off the UI's start-up and off every CLI command that streams nothing.
            from tui.sources.token_wire import TokenSession

            self._tokens = TokenSession(*self._session_args)
        return self._tokens

    async def aclose(self) -> None:
        await self._close_tokens()
        await super().aclose()

    async def __aexit__(self, *exc_info) -> None:
        # httpx's __aexit__ closes its transport without calling aclose().
        await self._close_tokens()
        await super().__aexit__(*exc_info)

    async def _close_tokens(self) -> None:
        if self._tokens is not None:
            await self._tokens.aclose()
            self._tokens = None


def make_client(
    base_url: str,
    api_key: SecretStr | None = None,
    timeout_s: float = 30.0,
    max_connections: int = 256,
) -> ServerClient:
    """A client for one server. The key goes into a header and nowhere else.

    It connects directly: HTTP(S)_PROXY in the environment is not used (a proxy would sit inside every
    TTFT; an explicit transport is also what turns httpx's environment proxies off, and aiohttp reads
    them only when asked).
    """
    headers = {"User-Agent": f"phasetop/{__version__}"}
    if api_key is not None and api_key.get_secret_value():
        headers["Authorization"] = f"Bearer {api_key.get_secret_value()}"
    return ServerClient(base_url.rstrip("/"), headers, timeout_s, max_connections)


class ResendOnStaleConnection(httpx.AsyncBaseTransport):
    """Pooled keep-alive connections, and one resend on a new connection when a reused one was already closed.

    A server may close an idle keep-alive connection whenever it likes (llama-server closes every
    one right after a streamed answer, while announcing keep-alive), and a request written into it
    before the close arrives fails without a response: the server never read it. Only that case is
    sent again, once, on a connection of its own (another pooled one may be just as stale). A
    failure on a new connection, or anything after the response head arrived (a server dying
    mid-answer), is never resent. token_wire.TokenSession does the same for token streams.

    Env proxies are not read (an explicit transport turns them off in httpx): phasetop talks to the
    server directly, so timings are the server's.
    """

    def __init__(self, max_connections: int) -> None:
        self._pooled = httpx.AsyncHTTPTransport(
            verify=_verifying_context(), limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        )
        self._fresh = httpx.AsyncHTTPTransport(
            verify=_verifying_context(), limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=0)
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


@functools.cache
def _verifying_context() -> ssl.SSLContext:
    """One certificate-verifying TLS context for the process: httpx loads the CA bundle afresh for every
    transport otherwise (about 50 ms of CPU each, two per client, one client per UI send)."""
    return httpx.create_ssl_context()


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
