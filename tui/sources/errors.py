"""Failures of a source, each worded as one line a person can act on.

Messages never contain the API key: they are built from the URL, the status and the server's
own error text only.
"""

from __future__ import annotations

import socket
import ssl

import httpx


class SourceError(Exception):
    """A source could not get what it asked for; `str()` is one line for a person."""


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
    """The server went silent for longer than the timeout."""


def from_httpx(error: httpx.HTTPError, url: str) -> SourceError:
    """Translate an httpx failure into a SourceError with a one-line message."""
    if isinstance(error, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return ServerUnavailable(f"bad URL {url!r}: {error}")
    if isinstance(error, httpx.ConnectTimeout):
        return ServerUnavailable(f"cannot connect to {url}: timed out")
    if isinstance(error, httpx.ConnectError):
        return ServerUnavailable(f"cannot connect to {url}: {_connect_reason(error)}")
    if isinstance(error, httpx.ReadTimeout | httpx.WriteTimeout | httpx.PoolTimeout):
        return ServerTimeout(f"{url}: no answer within the timeout")
    if isinstance(error, httpx.RemoteProtocolError):
        return ProtocolError(f"{url}: connection closed mid-answer ({error})")
    if isinstance(error, httpx.HTTPStatusError):
        return rejected(error.response.status_code, url, "")
    return SourceError(f"{url}: {type(error).__name__}: {error}")


def rejected(status: int, url: str, body_message: str) -> ServerRejected:
    """A one-line reason for an HTTP error status; 401/403 speak of the API key without showing it."""
    detail = f": {body_message}" if body_message else ""
    if status in (401, 403):
        hint = "the API key is missing or wrong (set PHASETOP_API_KEY or api_key in the config file)"
        return ServerRejected(f"{url}: HTTP {status}, {hint}", status)
    if status == 404:
        return ServerRejected(f"{url}: HTTP 404 not found{detail}", status)
    return ServerRejected(f"{url}: HTTP {status}{detail}", status)


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
