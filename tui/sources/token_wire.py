"""The token hot path: streamed generation requests over aiohttp, clocked on the wire.

Why not httpx here (figures in README.md, "Client timing fidelity"): at 128 streams httpcore's pool
spends most of the run in `_assign_requests_to_connections`, quadratic in its idle connections
(encode/httpcore#1035), and blocks the loop while tokens wait to be stamped; sharding the pool leaves
h11's per-chunk cost. aiohttp parses HTTP in C and costs about a quarter of the CPU per token.
Everything that is not a token stream (JSON calls, /metrics, /tokenize) stays on httpx.

Deadlines: a stream's head must arrive within `timeout_s` of sending (a server that drips its headers
fails), its body may take as long as it likes but not go silent for `timeout_s` (aiohttp's sock_read);
one line of it is capped (`line_max_bytes`, checked by the reader), an error body too.

A request the server never read, written into a pooled keep-alive connection it had already closed
(llama-server closes each one after a streamed answer while announcing keep-alive), fails before any
response; only that case is sent again, once, on a connection of its own. A failure on a new
connection, or anything after the response head arrived (a server dying mid-answer), is never resent.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from time import perf_counter_ns
from types import SimpleNamespace

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError

from tui.sources.errors import (ProtocolError, ServerTimeout, ServerUnavailable, SourceError, connection_reset, parser_reason,
                                redirected)
from tui.sources.wall_clock import unix_at_ns

STREAM_ERRORS = (aiohttp.ClientError, HttpProcessingError, TimeoutError)
"""Everything a request on a TokenSession can raise that is the server's or the network's doing. A body that is
not HTTP (a bad chunk size) raises the parser's own HttpProcessingError, which is no ClientError."""
STALE_CONNECTION_ERRORS = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)
"""How a request written into a connection the server had already closed fails: its FIN or its reset,
before any response. ClientConnectorError is a ClientOSError too: that one opened a connection, so the
`opened` check keeps it from being resent."""


class WireClock:
    """Per request (aiohttp's `trace_request_ctx`): when the body went on the wire, and any connection made for it.

    A resend stamps both again: its clock restarts.
    """

    __slots__ = ("sent_ns", "sent_unix", "connect_started_ns", "connect_done_ns", "opened")

    def __init__(self) -> None:
        self.sent_ns: int | None = None
        self.sent_unix: float | None = None
        self.connect_started_ns: int | None = None
        self.connect_done_ns: int | None = None
        self.opened = False

    @property
    def connect_s(self) -> float | None:
        if self.connect_started_ns is None or self.connect_done_ns is None:
            return None
        return (self.connect_done_ns - self.connect_started_ns) / 1e9


async def _body_going_out(session, context: SimpleNamespace, params) -> None:
    # Called just before the body's transport.write, with no yield to the loop in between.
    clock = context.trace_request_ctx
    clock.sent_ns = perf_counter_ns()
    clock.sent_unix = unix_at_ns(clock.sent_ns)


async def _connect_started(session, context: SimpleNamespace, params) -> None:
    context.trace_request_ctx.connect_started_ns = perf_counter_ns()
    context.trace_request_ctx.opened = True


async def _connect_done(session, context: SimpleNamespace, params) -> None:
    context.trace_request_ctx.connect_done_ns = perf_counter_ns()


def _wire_trace(on_connected) -> aiohttp.TraceConfig:
    trace = aiohttp.TraceConfig()
    trace.on_request_chunk_sent.append(_body_going_out)
    trace.on_connection_create_start.append(_connect_started)
    trace.on_connection_create_end.append(_connect_done)
    trace.on_connection_create_end.append(on_connected)
    trace.on_request_redirect.append(_refuse_redirect)
    return trace


async def _refuse_redirect(session, context: SimpleNamespace, params) -> None:
    # aiohttp calls this before it follows a redirect; raising here closes the response and follows nothing
    # (a 307 would send the prompt and the API key to whatever host the Location names).
    response = params.response
    raise redirected(response.status, str(params.url), response.headers.get("Location"))


class TokenSession:
    """aiohttp sessions for one server: a keep-alive pool, and a no-reuse one for a resend. Made inside the
    event loop that uses it (aiohttp binds to it).

    What a caller needs of aiohttp comes through here (`clock`, `errors`, `failure`), so only
    `ServerClient.tokens()` imports this module: aiohttp loads on the first stream, not at start-up.
    """

    errors = STREAM_ERRORS
    clock = WireClock

    def failure(self, error: Exception, url: str, answered: bool) -> SourceError:
        return from_aiohttp(error, url, answered, self.timeout_s)

    def __init__(self, base_url: str, headers: Mapping[str, str], timeout_s: float, max_connections: int,
                 limits) -> None:
        self.base_url = base_url
        self.timeout_s = timeout_s
        """Deadline of a stream's head (and of a warm-up or error body); also the longest silence mid-stream."""
        self.line_max_bytes: int = limits.line_max_bytes
        """Longest stream line the reader holds (a line that never ends must not grow without bound)."""
        self.document_max_bytes: int = limits.document_max_bytes
        self.connections_opened = 0
        """Connections opened so far, by both sessions: a warm-up for N streams should open N, and the streams none."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=min(timeout_s, 10.0), sock_read=timeout_s)
        # The stream is read as sent (auto_decompress off): an Accept-Encoding meant for the JSON client stays off it.
        headers = {name: value for name, value in headers.items() if name.lower() != "accept-encoding"}
        common = {"headers": headers, "timeout": timeout, "trace_configs": [_wire_trace(self._connected)],
                  "auto_decompress": False, "skip_auto_headers": ("Accept-Encoding",)}
        # trust_env stays False: HTTP(S)_PROXY is not used, a proxy would sit inside every TTFT.
        self._pooled = aiohttp.ClientSession(connector=_connector(max_connections), **common)
        self._fresh = aiohttp.ClientSession(connector=_connector(max_connections, force_close=True), **common)

    async def post(self, path: str, body: bytes, clock: WireClock) -> aiohttp.ClientResponse:
        """The response (head read, body not yet), resent once if a stale pooled connection swallowed it.

        Raises ServerTimeout when the head is not all there within `timeout_s`."""
        url = self.base_url + path
        headers = {"Content-Type": "application/json"}
        deadline = asyncio.timeout(self.timeout_s)
        try:
            async with deadline:
                try:
                    return await self._pooled.post(url, data=body, headers=headers, trace_request_ctx=clock)
                except STALE_CONNECTION_ERRORS:
                    if clock.opened:
                        raise
                return await self._fresh.post(url, data=body, headers=headers, trace_request_ctx=clock)
        except TimeoutError:
            if deadline.expired():
                raise self._too_slow(url) from None
            raise

    async def get(self, path: str, clock: WireClock) -> None:
        """A cheap GET whose answer is read and dropped (warming a connection); an error status is fine.

        The whole answer within `timeout_s` (else ServerTimeout), at most `document_max_bytes` of it read."""
        url = self.base_url + path
        deadline = asyncio.timeout(self.timeout_s)
        try:
            async with deadline, self._pooled.get(url, trace_request_ctx=clock) as response:
                left = self.document_max_bytes
                async for data in response.content.iter_any():
                    left -= len(data)
                    if left < 0:
                        response.close()  # the connection goes: the rest of the answer is never read
                        return
        except TimeoutError:
            if deadline.expired():
                raise self._too_slow(url) from None
            raise

    async def error_body(self, response: aiohttp.ClientResponse, url: str) -> bytes:
        """The start of an error answer's body (`document_max_bytes` at most), read within `timeout_s`; b"" if
        it does not come in time (the status says enough)."""
        parts: list[bytes] = []
        left = self.document_max_bytes
        try:
            async with asyncio.timeout(self.timeout_s):
                async for data in response.content.iter_any():
                    parts.append(data[:left])
                    left -= len(data)
                    if left <= 0:
                        break
        except STREAM_ERRORS:
            pass
        return b"".join(parts)

    @contextmanager
    def body_watched(self, response: aiohttp.ClientResponse) -> Iterator[None]:
        """While a stream's body is read: a parser failure on it ends the read with that failure, never a wait.

        aiohttp's C parser, failing on a body after the head (garbage where a chunk size goes), closes the
        connection and keeps the error on the connection's protocol, but never hands it to the body's reader,
        whose wait then has no end (its sock_read timer is dropped with the connection; aiohttp 3.14). So when
        the connection goes with the body unfinished and a parser error on it, the reader is given that error.
        """
        connection = response.connection
        protocol = connection.protocol if connection is not None else None
        if protocol is None:
            yield
            return
        reader = response.content

        def lost(_: asyncio.Future | None = None) -> None:
            failure = protocol.exception()
            if isinstance(failure, HttpProcessingError) and not reader.is_eof() and reader.exception() is None:
                reader.set_exception(failure)

        closed = protocol.closed  # None: the connection is gone already
        if closed is None:
            lost()
            yield
            return
        if protocol not in _CLOSE_WATCHED:
            # Asking for `closed` made the future; a connection later lost to a reset sets an exception on it that
            # no one would read (asyncio's "Future exception was never retrieved" on stderr). Read, once a connection.
            _CLOSE_WATCHED.add(protocol)
            closed.add_done_callback(_read_outcome)
        closed.add_done_callback(lost)
        try:
            yield
        finally:  # a pooled connection serves many requests: no callback of a finished one stays on it
            closed.remove_done_callback(lost)

    def _too_slow(self, url: str) -> ServerTimeout:
        return ServerTimeout(f"{url}: no complete answer within {self.timeout_s:g} s")

    async def _connected(self, session, context: SimpleNamespace, params) -> None:
        self.connections_opened += 1

    async def aclose(self) -> None:
        await self._pooled.close()
        await self._fresh.close()


_CLOSE_WATCHED: weakref.WeakSet = weakref.WeakSet()
"""Connections (their protocols) whose `closed` future `body_watched` has asked for, and reads the outcome of."""


def _read_outcome(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()


def _connector(limit: int, force_close: bool = False) -> aiohttp.TCPConnector:
    # limit_per_host=0: the one host gets the whole limit.
    return aiohttp.TCPConnector(limit=limit, limit_per_host=0, force_close=force_close)


def from_aiohttp(error: Exception, url: str, answered: bool, timeout_s: float | None = None) -> SourceError:
    """Translate an aiohttp failure into a SourceError worded like its httpx twin; `answered`: the response
    head had arrived (a failure then is the server dying mid-answer); `timeout_s`: the silence allowed."""
    if isinstance(error, aiohttp.InvalidURL | aiohttp.NonHttpUrlClientError):
        return ServerUnavailable(f"bad URL {url!r}: {error}")
    if isinstance(error, aiohttp.ConnectionTimeoutError):
        return ServerUnavailable(f"cannot connect to {url}: timed out")
    if isinstance(error, aiohttp.ClientConnectorError):
        return ServerUnavailable(f"cannot connect to {url}: {_connect_reason(error)}")
    if isinstance(error, TimeoutError):  # SocketTimeoutError is one: silence past sock_read
        if timeout_s is None:
            return ServerTimeout(f"{url}: no answer within the timeout")
        return ServerTimeout(f"{url}: silent for {timeout_s:g} s, no answer within the timeout")
    if isinstance(error, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError | aiohttp.ClientOSError):
        if connection_reset(error):
            return ProtocolError(f"{url}: connection reset by the server{' mid-answer' if answered else ''}")
        if answered:
            return ProtocolError(f"{url}: connection closed mid-answer ({_reason(error)})")
        return ProtocolError(f"{url}: the server closed the connection without sending a response")
    if isinstance(error, aiohttp.ClientResponseError | HttpProcessingError):
        what = "not valid HTTP mid-answer" if answered else "not an HTTP answer"
        return ProtocolError(f"{url}: {what} ({parser_reason(str(error.message))})")
    return SourceError(f"{url}: {type(error).__name__}: {_reason(error)}")


def _connect_reason(error: aiohttp.ClientConnectorError) -> str:
    if isinstance(error, aiohttp.ClientConnectorCertificateError):  # it carries no os_error
        return f"TLS error: {error.certificate_error}"
    os_error = error.os_error
    if isinstance(error, aiohttp.ClientConnectorSSLError) or isinstance(os_error, ssl.SSLError):
        return f"TLS error: {getattr(os_error, 'reason', None) or os_error}"
    if isinstance(os_error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, aiohttp.ClientConnectorDNSError) or isinstance(os_error, socket.gaierror):
        return "DNS lookup failed"
    return os_error.strerror or str(os_error)


def _reason(error: Exception) -> str:
    return parser_reason(str(error)) if str(error).strip() else type(error).__name__
