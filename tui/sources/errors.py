"""Failures of a source, each worded as one line a person can act on.

Messages never contain the API key: they are built from the URL, the status and the server's
own error text only, and that text is redacted as the error is made (a server may echo the key). Nor
do they hold a line break: one made of several lines (an HTTP parser's, with its caret under the bad
byte) is folded into one as the error is made.
"""

from __future__ import annotations

import socket
import ssl

import httpx

from tui.core.untrusted import folded, one_line, redact

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
"""Statuses that send the client elsewhere (with a Location): phasetop never follows one."""


class SourceError(Exception):
    """A source could not get what it asked for; `str()` is one line for a person, secrets redacted."""

    def __init__(self, message: str = "") -> None:
        super().__init__(folded(redact(message)))


class ServerUnavailable(SourceError):
    """Nothing answered: bad URL, DNS failure, refused connection, TLS failure, connect timeout."""


class ServerRejected(SourceError):
    """The server answered with an HTTP error status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ProtocolError(SourceError):
    """The server answered, but not in the shape the API promises (bad JSON, not SSE, cut stream)."""


class ServerTimeout(SourceError):
    """The server went silent for longer than the timeout, or did not finish an answer within its deadline."""


class AnswerTooSlow(httpx.TimeoutException):
    """An answer did not arrive whole within its deadline (a server that drips); `str()` says within how long."""


class AnswerRefused(httpx.DecodingError):
    """phasetop stopped reading an answer: larger than its cap, or in an encoding it does not read; `str()` says which."""


def from_httpx(error: httpx.HTTPError, url: str) -> SourceError:
    """Translate an httpx failure into a SourceError with a one-line message."""
    if isinstance(error, AnswerTooSlow):
        return ServerTimeout(f"{url}: {error}")
    if isinstance(error, AnswerRefused):
        return ProtocolError(f"{url}: {error}")
    if isinstance(error, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return ServerUnavailable(f"bad URL {url!r}: {error}")
    if isinstance(error, httpx.ConnectTimeout):
        return ServerUnavailable(f"cannot connect to {url}: timed out")
    if isinstance(error, httpx.ConnectError):
        return ServerUnavailable(f"cannot connect to {url}: {_connect_reason(error)}")
    if isinstance(error, httpx.ReadTimeout | httpx.WriteTimeout | httpx.PoolTimeout):
        return ServerTimeout(f"{url}: no answer within the timeout")
    if isinstance(error, httpx.RemoteProtocolError):
        if any(words in str(error).lower() for words in _CLOSED):
            return ProtocolError(f"{url}: connection closed mid-answer ({one_line(str(error))})")
        return ProtocolError(f"{url}: not an HTTP answer ({parser_reason(str(error))})")
    if isinstance(error, httpx.ReadError | httpx.WriteError) and connection_reset(error):
        return ProtocolError(f"{url}: connection reset by the server")
    if isinstance(error, httpx.HTTPStatusError):
        return rejected(error.response.status_code, url, "", error.response.headers.get("location"))
    return SourceError(f"{url}: {type(error).__name__}" + (f": {one_line(str(error))}" if str(error) else ""))


_CLOSED = ("disconnected", "peer closed")
"""httpcore's and h11's words for a server that closed the connection ("Server disconnected without sending a
response", "peer closed connection without sending complete message body"); any other RemoteProtocolError is
bytes that are not HTTP ("illegal status line: ...")."""


def parser_reason(message: str) -> str:
    """An HTTP parser's complaint as one short line. aiohttp's has several ("Bad status line:", "Invalid
    status code:", a blank, the bytes, a caret line under the bad one): the caret line goes, the rest is joined,
    "Bad status line: Invalid status code: b'HTTP/1.1 abc OK'"."""
    lines = (line.strip() for line in message.splitlines())
    return one_line(" ".join(line for line in lines if line and line.strip("^ ")), 160)


def rejected(status: int, url: str, body_message: str, location: str | None = None) -> ServerRejected:
    """A one-line reason for an HTTP error status; 401/403 speak of the API key without showing it; a
    redirect says where to (`location`, the server's Location header)."""
    if status in REDIRECT_STATUSES:
        return redirected(status, url, location)
    detail = f": {body_message}" if body_message else ""
    if status in (401, 403):
        hint = "the API key is missing or wrong (set PHASETOP_API_KEY or api_key in the config file)"
        return ServerRejected(f"{url}: HTTP {status}, {hint}", status)
    if status == 404:
        return ServerRejected(f"{url}: HTTP 404 not found{detail}", status)
    return ServerRejected(f"{url}: HTTP {status}{detail}", status)


def redirected(status: int, url: str, location: str | None) -> ServerRejected:
    """A redirect, refused: following it could take the request and its API key to another host."""
    where = f" to {one_line(location)}" if location else ""
    return ServerRejected(f"{url}: redirected (HTTP {status}){where}, not followed: point --url at the server itself", status)


def connection_reset(error: BaseException) -> bool:
    """The failure is the peer's reset (its RST): the cause chain holds a ConnectionResetError, or the text
    says so (aiohttp folds the reset into its payload error's message)."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ConnectionResetError):
            return True
        if "connection reset" in str(cause).lower():
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _connect_reason(error: httpx.ConnectError) -> str:
    cause = error.__cause__ or error.__context__
    text = str(error) or type(error).__name__
    while cause is not None:
        if isinstance(cause, ssl.SSLError):
            return f"TLS error: {cause.reason or cause}"
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, socket.gaierror):
            return "DNS lookup failed"
        cause = cause.__cause__ or cause.__context__
    lowered = text.lower()
    if "name or service not known" in lowered or "nodename nor servname" in lowered or "temporary failure in name resolution" in lowered:
        return "DNS lookup failed"
    if "refused" in lowered:
        return "connection refused"
    if "certificate" in lowered or "ssl" in lowered:
        return f"TLS error: {text}"
    return text
