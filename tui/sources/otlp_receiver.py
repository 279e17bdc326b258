"""An OTLP/HTTP trace receiver: POST /v1/traces with protobuf `ExportTraceServiceRequest`s, read into served requests.

The simulator's stack (Starlette routes, uvicorn with httptools) on a socket bound here, loopback by default. A
sender is anyone who can reach the port, so everything it sends is held to limits: a body over `max_body_bytes`
is refused from its Content-Length before a byte of it is read (or as soon as a chunked one passes the limit),
a gzip one inflates to at most `max_decoded_bytes`, a body that trickles in is cut at `body_deadline_s`, at most
`max_connections` are served at once (uvicorn answers 503 past that, which an exporter retries), and what is
kept is a bounded window (`TraceWindow`). Every refusal is OTLP's: an HTTP error status with a protobuf
`google.rpc.Status` body saying why. The receiver answers the next request whatever the last one was.
A request span whose times no request could have (a sender's clock far ahead or never set) is refused, counted by
reason and told to the sender as rejected: the window ages by phasetop's own clock, so such a span pushes nothing out.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import replace

import uvicorn
from google.protobuf.message import DecodeError
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from tui.core.telemetry.otlp_spans import REQUEST_SPAN, SpanBatch, read_export
from tui.core.telemetry.served import REFUSALS, TraceWindow, screened
from tui.core.untrusted import one_line
from tui.net import bind

TRACES_PATH = "/v1/traces"
DEFAULT_PORT = 4318
"""OTLP/HTTP's registered port."""
PROTOBUF = "application/x-protobuf"
PROTOBUF_TYPES = frozenset({PROTOBUF, "application/protobuf"})
MB = 1024 * 1024
MAX_BODY_BYTES = 8 * MB
"""Largest export read, on the wire: an SDK's batch of 512 vLLM spans is about 200 kB, a Collector's of 8,192
about 3 MB."""
MAX_DECODED_BYTES = 32 * MB
"""Largest export once inflated: a gzip bomb stops here."""
BODY_DEADLINE_S = 30.0
MAX_CONNECTIONS = 32
"""Requests served at once; bodies held in memory are at most this many × MAX_BODY_BYTES."""


class Refused(Exception):
    """An export answered with an error: `status` (HTTP) and the one-line reason its Status body carries."""

    def __init__(self, status: int, reason: str, code: int = code_pb2.INVALID_ARGUMENT) -> None:
        super().__init__(reason)
        self.status = status
        self.code = code


def listen_address(text: str) -> tuple[str, int]:
    """`[HOST:]PORT` → (host, port): "4318" listens on 127.0.0.1, "0.0.0.0:4318" everywhere, "[::1]:4318" on IPv6
    loopback. ValueError with one line for anything else (a port out of 0–65535, an empty host, a name)."""
    text = text.strip()
    host, colon, port_text = text.rpartition(":")
    if not colon:
        host = "127.0.0.1"
    elif host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{text!r}: write an IPv6 address in brackets, [::1]:{port_text}")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"{text!r} is not [HOST:]PORT (a port from 0 to 65535; 0 picks a free one)")
    if host == "localhost":
        host = "127.0.0.1"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"{text!r}: the host must be an IP address to listen on (127.0.0.1, 0.0.0.0, [::1])") from None
    return host, int(port_text)


class TraceReceiver:
    """Serves POST /v1/traces until `stop()`: each export's requests go into `window`, then to `on_batch`."""

    def __init__(
        self,
        window: TraceWindow | None = None,
        on_batch: Callable[[SpanBatch], None] | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_decoded_bytes: int = MAX_DECODED_BYTES,
        body_deadline_s: float = BODY_DEADLINE_S,
        max_connections: int = MAX_CONNECTIONS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.window = window if window is not None else TraceWindow()
        self.on_batch = on_batch
        """Called in the serving loop after each export that held spans (a CLI prints them as they come)."""
        self.max_body_bytes = max_body_bytes
        self.max_decoded_bytes = max_decoded_bytes
        self.body_deadline_s = body_deadline_s
        self.max_connections = max_connections
        self.clock = clock
        """phasetop's wall clock: a span's receipt, which ages the window and judges the span's own times."""
        self.last_refusal: str | None = None
        """Why the latest refused export was refused (its status and reason), for a person."""
        self._server: uvicorn.Server | None = None
        errors = {404: self._not_found, 405: self._not_allowed}
        self.app = Starlette(routes=[Route(TRACES_PATH, self._export, methods=["POST"])], exception_handlers=errors)

    @staticmethod
    def bind(address: str) -> socket.socket:
        """The listening socket for `[HOST:]PORT`; ValueError for a bad address, OSError (port in use) from the OS."""
        return bind(*listen_address(address))

    async def serve(self, sock: socket.socket, on_ready: Callable[[], None] | None = None) -> None:
        """Serve on `sock` (see `bind`) until `stop()`; `on_ready()` once it accepts connections."""
        # log_level "error": a sender past the connection limit gets its 503, not a line on our stderr each time.
        config = uvicorn.Config(self.app, http="httptools", log_level="error", access_log=False, lifespan="off",
                                limit_concurrency=self.max_connections, timeout_graceful_shutdown=2)
        server = self._server = _QuietServer(config)
        task = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        if server.started and on_ready is not None:
            on_ready()
        await task

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True

    async def _export(self, request: Request) -> Response:
        try:
            body = await self._body(request)
            batch = read_export(_decoded(body))
        except Refused as refused:
            self.window.tally.refused_posts += 1
            self.last_refusal = f"HTTP {refused.status}: {refused}"
            headers = {"connection": "close"} if refused.status in (408, 413) else None  # the rest is left unread
            return _status(refused.status, str(refused), refused.code, headers)
        except ClientDisconnect:
            self.window.tally.refused_posts += 1
            return Response(status_code=400)  # no one is there to read it
        kept = self._keep(batch)
        return Response(kept.response().SerializeToString(), media_type=PROTOBUF)

    async def _body(self, request: Request) -> bytes:
        """The body, read only if it is a protobuf export within the limits."""
        kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if kind not in PROTOBUF_TYPES:
            shown = one_line(kind, 60) or "no content type"
            hint = " (OTLP/JSON is not read: set OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf)" if "json" in kind else ""
            raise Refused(415, f"expected {PROTOBUF}, got {shown}{hint}")
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body_bytes):
            raise Refused(413, f"an export of {one_line(declared, 20)} bytes: at most {self.max_body_bytes} are read",
                          code_pb2.RESOURCE_EXHAUSTED)
        parts: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.body_deadline_s):
                async for part in request.stream():
                    size += len(part)
                    if size > self.max_body_bytes:
                        raise Refused(413, f"an export over {self.max_body_bytes} bytes: stopped reading",
                                      code_pb2.RESOURCE_EXHAUSTED)
                    parts.append(part)
        except TimeoutError:
            raise Refused(408, f"the export's body took over {self.body_deadline_s:g} s to arrive",
                          code_pb2.DEADLINE_EXCEEDED) from None
        body = b"".join(parts)
        return _inflated(body, request.headers.get("content-encoding", ""), self.max_decoded_bytes)

    def _keep(self, batch: SpanBatch) -> SpanBatch:
        """Take in the export's plausible requests, stamped with their receipt; the batch as kept (its refused
        spans told to the sender as rejected, OTLP's partial success)."""
        tally = self.window.tally
        tally.posts += 1
        tally.spans += batch.spans
        tally.rejected_spans += batch.rejected
        tally.spans_with_dropped_attributes += batch.spans_with_dropped_attributes
        tally.dropped_events += batch.dropped_events
        records, refused = screened(batch.records, self.clock())
        tally.refuse(refused)
        self.window.add(records, batch.server_spans)
        if refused:
            count = len(refused)
            why = f"{count} {REQUEST_SPAN} span{'s' * (count != 1)} refused, the first {REFUSALS[refused[0]]}"
            batch = replace(batch, records=records, rejected=batch.rejected + len(refused),
                            reject_reason=batch.reject_reason or why)
        if batch.spans and self.on_batch is not None:
            self.on_batch(batch)
        return batch

    async def _not_found(self, request: Request, error: HTTPException) -> Response:
        return _status(404, f"no {one_line(request.url.path, 80)} here: OTLP/HTTP traces go to POST {TRACES_PATH}",
                       code_pb2.NOT_FOUND)

    async def _not_allowed(self, request: Request, error: HTTPException) -> Response:
        return _status(405, f"{one_line(request.method, 10)} {TRACES_PATH}: exports are POSTed", code_pb2.UNIMPLEMENTED,
                       {"allow": "POST"})


class _QuietServer(uvicorn.Server):
    """uvicorn without its own signal handlers: the command that runs it decides what Ctrl-C does."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _inflated(body: bytes, encoding: str, limit: int) -> bytes:
    """The body as sent (no encoding, or identity) or gunzipped to at most `limit` bytes."""
    coding = encoding.strip().lower()
    if coding in ("", "identity"):
        return body
    if coding not in ("gzip", "x-gzip"):
        raise Refused(415, f"Content-Encoding {one_line(encoding, 30)!r} is not read (send gzip or none)")
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as error:
        raise Refused(400, f"a gzip body that does not inflate ({error})") from None
    if len(data) > limit:
        raise Refused(413, f"an export over {limit} bytes once inflated: not read", code_pb2.RESOURCE_EXHAUSTED)
    if not inflater.eof:
        raise Refused(400, "a gzip body cut short")
    return data


def _decoded(body: bytes) -> ExportTraceServiceRequest:
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except DecodeError:
        raise Refused(400, "not an OTLP trace export: its protobuf does not decode") from None
    if body and not request.resource_spans:  # bytes that parse only as fields unknown to the export
        raise Refused(400, "not an OTLP trace export: no resource_spans in it")
    return request


def _status(status: int, message: str, code: int, headers: dict[str, str] | None = None) -> Response:
    """OTLP/HTTP's error answer: the status and a protobuf `google.rpc.Status` saying why."""
    body = status_pb2.Status(code=code, message=message).SerializeToString()
    return Response(body, status_code=status, media_type=PROTOBUF, headers=headers)
