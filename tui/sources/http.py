"""The one place a server's client is made: base URL, bearer key, deadlines, caps, and pools that survive stale connections.

httpx for the JSON calls; token streams go over the aiohttp session it carries (token_wire.py).

Every answer the httpx client gets is read whole inside its transport (`WholeAnswers`), under one
deadline for the whole request (connect, head and body: a server that drips a byte a second never trips a
per-read timeout) and a cap on its inflated size (a gzip bomb is stopped at the cap, not inflated whole).
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import httpx
import orjson
from pydantic import SecretStr

from tui import __version__
from tui.core.untrusted import one_line
from tui.sources.errors import AnswerRefused, AnswerTooSlow

if TYPE_CHECKING:
    from tui.config import Settings
    from tui.sources.token_wire import TokenSession

STALE_CONNECTION_ERRORS = (httpx.RemoteProtocolError, httpx.ReadError)
"""How a request written into a connection the server had already closed fails: the server's FIN
("Server disconnected without sending a response") or its reset, before any response."""


MB = 2**20


@dataclass(frozen=True, slots=True)
class BodyLimits:
    """The most phasetop reads of one answer, in decoded (inflated) bytes; `tui.config.LimitSettings` has the same
    fields and may be passed wherever this is."""

    metrics_max_bytes: int = 16 * MB
    """A /metrics page (vLLM's is a few hundred kB)."""
    document_max_bytes: int = MB
    """Any other answer: JSON documents, /tokenize, an error body."""
    line_max_bytes: int = MB
    """One SSE or NDJSON line of a token stream."""


ACCEPT_ENCODING = "gzip, deflate"
"""The encodings `WholeAnswers` inflates itself, bounded; nothing else is asked for."""


class StreamTarget(NamedTuple):
    """What a token session for one server is made from: a meter process is handed this to stream to it (the
    bearer key in `headers` travels on the meter's pipe only, never on a command line or in a file)."""

    base_url: str
    headers: dict[str, str]
    timeout_s: float
    max_connections: int
    limits: BodyLimits


class ServerClient(httpx.AsyncClient):
    """An httpx client for one server that also carries the aiohttp session its token streams use.

    The session is made on first use, inside the event loop that streams (aiohttp binds to it), and
    closed with the client.
    """

    def __init__(self, base_url: str, headers: dict[str, str], timeout_s: float, max_connections: int,
                 limits: BodyLimits) -> None:
        super().__init__(
            base_url=base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            transport=WholeAnswers(ResendOnStaleConnection(max_connections), limits, timeout_s),
        )
        self.limits = limits
        self.stream_target = StreamTarget(base_url, headers, timeout_s, max_connections, limits)
        """Its token session's makings (`tokens()`)."""
        self._tokens: TokenSession | None = None

    def tokens(self) -> TokenSession:
        if self._tokens is None:
            # aiohttp loads here, on the first stream: its import (~150 ms, 64 of them its CA bundle) stays
            # off the UI's start-up and off every CLI command that streams nothing.
            from tui.sources.token_wire import TokenSession

            self._tokens = TokenSession(*self.stream_target)
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
    limits: BodyLimits | None = None,
) -> ServerClient:
    """A client for one server. The key goes into a header and nowhere else.

    `timeout_s` is the deadline of a whole answer (a JSON document, /metrics), and of a token stream's head;
    a stream's body may take as long as it likes, but not go silent that long. `limits`: `BodyLimits` or the
    settings' `limits` section.

    It connects directly: HTTP(S)_PROXY in the environment is not used (a proxy would sit inside every
    TTFT; an explicit transport is also what turns httpx's environment proxies off, and aiohttp reads
    them only when asked).
    """
    headers = {"User-Agent": f"phasetop/{__version__}", "Accept-Encoding": ACCEPT_ENCODING}
    if api_key is not None and api_key.get_secret_value():
        headers["Authorization"] = f"Bearer {api_key.get_secret_value()}"
    limits = BodyLimits(limits.metrics_max_bytes, limits.document_max_bytes, limits.line_max_bytes) if limits else BodyLimits()
    return ServerClient(base_url.rstrip("/"), headers, timeout_s, max_connections, limits)


def client_for(settings: Settings, url: str | None = None, max_connections: int = 256) -> ServerClient:
    """`make_client` for `url` (default: the settings' URL) with the settings' key, timeout and limits."""
    return make_client(url or settings.url, settings.api_key, settings.timeout_s, max_connections, settings.limits)


class WholeAnswers(httpx.AsyncBaseTransport):
    """Reads each answer whole, inflated here with a cap, within one deadline for the request, and hands on a
    response that is already in memory (so the client's own read is instant and can be neither slow nor large).

    The deadline is the client's `timeout_s`, or a shorter `timeout=` given to one call (identity.py's 5 s); never
    longer, so `--timeout 1` bounds every answer.
    /metrics pages get `metrics_max_bytes`, everything else `document_max_bytes`. httpx's own decoders would
    inflate each network read whole (64 kB of a bomb is 64 MB), so gzip and deflate are inflated here,
    never past the cap; the response passed on carries no Content-Encoding.
    """

    def __init__(self, inner: httpx.AsyncBaseTransport, limits: BodyLimits, deadline_s: float) -> None:
        self._inner = inner
        self._limits = limits
        self._deadline_s = deadline_s

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        asked_s = (request.extensions.get("timeout") or {}).get("read")
        deadline_s = self._deadline_s if asked_s is None else min(asked_s, self._deadline_s)
        path = request.url.path.rstrip("/")
        limit = self._limits.metrics_max_bytes if path.endswith("/metrics") else self._limits.document_max_bytes
        try:
            async with asyncio.timeout(deadline_s):
                response = await self._inner.handle_async_request(request)
                try:
                    body = await _read_capped(response, limit, request)
                finally:
                    await response.aclose()
        except TimeoutError:
            raise AnswerTooSlow(f"no complete answer within {deadline_s:g} s", request=request) from None
        headers = [(name, value) for name, value in response.headers.raw
                   if name.lower() not in (b"content-encoding", b"content-length", b"transfer-encoding")]
        headers.append((b"Content-Length", str(len(body)).encode()))
        kept = {key: response.extensions[key] for key in ("http_version", "reason_phrase") if key in response.extensions}
        return httpx.Response(response.status_code, headers=headers, stream=httpx.ByteStream(body), extensions=kept)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def _read_capped(response: httpx.Response, limit: int, request: httpx.Request) -> bytes:
    """The body, inflated, raising AnswerRefused as soon as it passes `limit` bytes (nothing past it is held)."""
    inflater = _Inflater.for_encoding(response.headers.get("content-encoding", ""), request)
    parts: list[bytes] = []
    size = 0
    async for raw in response.stream:
        for part in inflater.inflate(raw, limit - size):
            size += len(part)
            if size > limit:
                raise AnswerRefused(f"answer larger than {size_text(limit)}: stopped reading", request=request)
            parts.append(part)
    for part in inflater.finish(limit - size):
        size += len(part)
        if size > limit:
            raise AnswerRefused(f"answer larger than {size_text(limit)}: stopped reading", request=request)
        parts.append(part)
    return b"".join(parts)


class _Inflater:
    """gzip or deflate inflated at most `room + 1` bytes at a time (zlib's max_length), or bytes as they come."""

    __slots__ = ("_zlib", "_raw_fallback", "_request")

    def __init__(self, decompressor, raw_fallback: bool, request: httpx.Request) -> None:
        self._zlib = decompressor
        self._raw_fallback = raw_fallback
        """deflate: a server may send raw deflate without the zlib header (as httpx allows, retried once)."""
        self._request = request

    @classmethod
    def for_encoding(cls, header: str, request: httpx.Request) -> _Inflater:
        codings = [c.strip().lower() for c in header.split(",") if c.strip() and c.strip().lower() != "identity"]
        if not codings:
            return cls(None, False, request)
        if codings in (["gzip"], ["x-gzip"]):
            return cls(zlib.decompressobj(zlib.MAX_WBITS | 16), False, request)
        if codings == ["deflate"]:
            return cls(zlib.decompressobj(), True, request)
        raise AnswerRefused(f"answered in Content-Encoding {one_line(header, 40)!r}, which phasetop does not read "
                            f"(it asks for {ACCEPT_ENCODING})", request=request)

    def inflate(self, data: bytes, room: int) -> list[bytes]:
        if self._zlib is None:
            return [data]
        parts = []
        while data and not self._zlib.eof:
            try:
                part = self._zlib.decompress(data, max(room, 0) + 1)
            except zlib.error as error:
                if self._raw_fallback and not parts and not self._zlib.unused_data:
                    self._zlib, self._raw_fallback = zlib.decompressobj(-zlib.MAX_WBITS), False
                    continue
                raise AnswerRefused(f"a compressed answer that does not inflate ({error})", request=self._request) from None
            self._raw_fallback = False
            parts.append(part)
            room -= len(part)
            if room < 0:
                break  # over the cap: the caller stops reading
            data = self._zlib.unconsumed_tail
        return parts

    def finish(self, room: int) -> list[bytes]:
        if self._zlib is None:
            return []
        try:
            return [self._zlib.flush()] if room >= 0 else []
        except zlib.error as error:
            raise AnswerRefused(f"a compressed answer that does not inflate ({error})", request=self._request) from None


def json_body(document: object) -> bytes:
    """A request body as JSON bytes. A lone surrogate in it (a model id the server itself listed as `\\ud93f`)
    goes back as that JSON escape, so the server gets what it said: orjson and httpx's `json=` encode UTF-8,
    which has no such character, and would raise."""
    try:
        return orjson.dumps(document)
    except TypeError:  # "str is not valid UTF-8: surrogates not allowed"; json's ensure_ascii escapes them
        return json.dumps(document, separators=(",", ":")).encode("ascii")


JSON_HEADERS = {"Content-Type": "application/json"}


def size_text(n_bytes: int) -> str:
    """16 MB, 1 MB, 512 kB, 100 bytes: a cap as a person reads it."""
    if n_bytes >= MB:
        return f"{n_bytes / MB:g} MB"
    if n_bytes >= 1024:
        return f"{n_bytes / 1024:g} kB"
    return f"{n_bytes} bytes"


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
