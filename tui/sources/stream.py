"""Streamed requests to the three wire APIs, timed chunk by chunk.

Two layers: `stream()` yields each content chunk as it arrives, then the finished
`RequestTiming`; `measure()` keeps only the timing. The clock starts when the request body was on
the wire (aiohttp's request trace, token_wire.py), so connection set-up and write queueing stay out of TTFT.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from time import perf_counter_ns
from typing import NamedTuple

import orjson

from tui.core.measure.chunk_tokens import settled
from tui.core.measure.records import RequestTiming, ServerSplit
from tui.core.measure.sse import SSE_DONE, LineSplitter, sse_field
from tui.core.untrusted import one_line
from tui.sources.chunks import Tally, read_llamacpp, read_ollama, read_openai
from tui.sources.errors import ProtocolError, SourceError, rejected
from tui.sources.http import ServerClient, json_body, size_text
from tui.sources.wall_clock import unix_at_ns

ApiName = str
"""One of "openai", "ollama", "llamacpp"."""


@dataclass(frozen=True, slots=True)
class StreamRequest:
    """One generation request: which API, which model, what prompt, how many tokens back."""

    api: ApiName
    model: str
    prompt: str
    max_tokens: int
    chat: bool = False
    prompt_tokens: int | None = None
    """The prompt's length if known before sending (from /tokenize); the server's usage overrides it."""
    prompt_tokens_estimated: bool = False
    """True when `prompt_tokens` is a guess made without the server's tokenizer."""
    exact_length: bool = True
    """Ask for exactly `max_tokens` (no stop at end-of-sequence) where the API offers it: every run then
    generates the same tokens, so figures compare. Ollama offers no such option."""


class ChunkArrived(NamedTuple):
    """A chunk arrived `offset_s` seconds after the request was sent, carrying `tokens` generated tokens (0 for text
    alone, several for a speculative step's or a stream interval's) and their text (untrusted; empty for a token whose
    bytes the server holds back).

    A named tuple, not a frozen dataclass: one is made per token, and it is a quarter cheaper to make
    (0.40 against 0.55 µs here)."""

    offset_s: float
    text: str
    tokens: int = 1


@dataclass(frozen=True, slots=True)
class RequestSent:
    """The request's body went on the wire at `t_sent_unix` (`wall_clock`), and the response head came back."""

    t_sent_unix: float


@dataclass(frozen=True, slots=True)
class RequestFinished:
    """The request ended (well or not); `timing` holds everything that was measured."""

    timing: RequestTiming


StreamEvent = RequestSent | ChunkArrived | RequestFinished


@dataclass(frozen=True, slots=True)
class _Route:
    path: str
    body: dict
    sse: bool
    read: Callable[[dict, Tally], str]


def route_for(request: StreamRequest) -> _Route:
    """The endpoint, JSON body, framing and chunk reader SPEC's table gives each API."""
    if request.api == "ollama":
        body = {"model": request.model, "stream": True, "options": {"num_predict": request.max_tokens}}
        if request.chat:
            return _Route("/api/chat", body | {"messages": [{"role": "user", "content": request.prompt}]}, False, read_ollama)
        return _Route("/api/generate", body | {"prompt": request.prompt}, False, read_ollama)
    if request.api == "llamacpp" and not request.chat:
        body = {"prompt": request.prompt, "n_predict": request.max_tokens, "stream": True}
        if request.exact_length:
            body["ignore_eos"] = True
        return _Route("/completion", body, True, read_llamacpp)
    if request.api not in ("openai", "llamacpp"):
        raise ValueError(f"unknown API {request.api!r}")
    body = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "stream": True,
        # vLLM 0.33 defaults include_usage to false, 0.10 to true: always ask.
        "stream_options": {"include_usage": True},
    }
    if request.exact_length:
        # vLLM and SGLang read both, llama.cpp reads ignore_eos; most servers ignore fields they do not know
        # (one that refuses them: --allow-eos leaves them out). Usage on every chunk counts the tokens each carried
        # (several with --stream-interval or speculation: chunk_tokens.py).
        body |= {"ignore_eos": True, "min_tokens": request.max_tokens,
                 "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    if request.chat:
        return _Route("/v1/chat/completions", body | {"messages": [{"role": "user", "content": request.prompt}]}, True, read_openai)
    return _Route("/v1/completions", body | {"prompt": request.prompt}, True, read_openai)


async def warm_up(client: ServerClient, path: str, connections: int = 1) -> float | None:
    """Open `connections` pooled stream connections with cheap GETs; the connect time of one, in seconds.

    Done before timing, so the timed request reuses a live connection.
    """
    tokens = client.tokens()
    clocks = [tokens.clock() for _ in range(connections)]
    try:
        await asyncio.gather(*(tokens.get(path, clock) for clock in clocks))
    except tokens.errors as error:
        raise tokens.failure(error, tokens.base_url + path, answered=False) from None
    times = [c.connect_s for c in clocks if c.connect_s is not None]
    return max(times) if times else None


async def stream(client: ServerClient, request: StreamRequest, connect_s: float | None = None) -> AsyncIterator[StreamEvent]:
    """Send `request`; yield `RequestSent` once the response head is back, each content chunk as it arrives, then
    one `RequestFinished`.

    A failure ends the stream with `RequestFinished(ok=False)` holding every offset that arrived.
    `connect_s` is the warm-up's connect time, used when this request opened no connection itself.
    """
    route = route_for(request)
    tokens = client.tokens()
    clock = tokens.clock()
    tally = Tally()
    offsets: list[float] = []
    texts: list[str] = []
    sizes: list[int] = []
    start_ns = perf_counter_ns()
    error: str | None = None
    url = tokens.base_url + route.path
    answered = False
    try:
        async with await tokens.post(route.path, json_body(route.body), clock) as response:
            answered = True
            sent_ns = clock.sent_ns or start_ns
            yield RequestSent(unix_at_ns(sent_ns))
            if response.status >= 400:
                raise rejected(response.status, url, _error_message(await tokens.error_body(response, url)))
            _check_framing(response.headers.get("content-type", ""), route.sse, url)
            splitter = LineSplitter()
            max_line = tokens.line_max_bytes
            payloads_of = _sse_payloads if route.sse else _ndjson_payloads
            with tokens.body_watched(response):  # a body that breaks HTTP ends the read, never hangs it
                async for data in response.content.iter_any():
                    # perf_counter_ns right after the read: nothing slower between read and stamp.
                    offset_s = (perf_counter_ns() - sent_ns) / 1e9
                    lines = splitter.feed(data)
                    if len(splitter.pending) > max_line:  # a line that never ends must not grow without bound
                        raise ProtocolError(f"{url}: a stream line longer than {size_text(max_line)}: stopped reading")
                    for text, carried in _chunks(payloads_of(lines, tally), route, tally, url):
                        offsets.append(offset_s)
                        texts.append(text)
                        sizes.append(carried)
                        yield ChunkArrived(offset_s, text, carried)
            if splitter.pending.strip():  # a last line without its line end
                for text, carried in _chunks(payloads_of([splitter.pending], tally), route, tally, url):
                    offsets.append(offset_s)
                    texts.append(text)
                    sizes.append(carried)
                    yield ChunkArrived(offset_s, text, carried)
            if not tally.done:
                raise ProtocolError(f"{url}: the stream ended before the answer was complete")
    except SourceError as failure:
        error = str(failure)
    except tokens.errors as failure:
        error = str(tokens.failure(failure, url, answered))
    sent_unix = clock.sent_unix or unix_at_ns(start_ns)
    yield RequestFinished(_timing(request, tally, offsets, texts, sizes, sent_unix, clock.connect_s or connect_s, error))


def _chunks(payloads: list[bytes], route: _Route, tally: Tally, url: str) -> Iterator[tuple[str, int]]:
    """The payloads that carried generated tokens or text, each as its text and its count of tokens, one at a time:
    a server-reported error or a malformed chunk raises where it stands, after the chunks the same read held before
    it (what arrived is kept); an SSE `error:` field of this read, whose place among its data lines is not kept,
    after all of them."""
    field_error = tally.error
    for payload in payloads:
        chunk = _parse(payload, url)
        carried = tally.tokens_carried
        try:
            text = route.read(chunk, tally)
        except ProtocolError as malformed:  # the reader knows the field, not the URL
            raise ProtocolError(f"{url}: {malformed}") from None
        if tally.error != field_error:
            raise ProtocolError(f"{url}: the server reported an error: {tally.error}")
        tokens = tally.tokens_carried - carried
        if tokens > 0 or text:
            yield text, max(tokens, 0)
    if tally.error:
        raise ProtocolError(f"{url}: the server reported an error: {tally.error}")


async def measure(client: ServerClient, request: StreamRequest, connect_s: float | None = None) -> RequestTiming:
    """Send `request` and return its timing (ok=False with what arrived, on failure)."""
    async for event in stream(client, request, connect_s):
        if isinstance(event, RequestFinished):
            return event.timing
    raise AssertionError("stream() always ends with RequestFinished")


def _sse_payloads(lines: list[bytes], tally: Tally) -> list[bytes]:
    payloads = []
    for line in lines:
        if line[:5] == b"data:":  # nearly every line: read here, without the general field parser
            value = line[6:] if line[5:6] == b" " else line[5:]
            if value == SSE_DONE:
                tally.done = True
            else:
                payloads.append(value)
            continue
        field = sse_field(line)
        if field is not None and field[0] == b"error":
            tally.error = one_line(field[1].decode("utf-8", "replace"))
    return payloads


def _ndjson_payloads(lines: list[bytes], tally: Tally) -> list[bytes]:
    return [line for line in lines if line.strip()]


def _parse(payload: bytes | str, url: str) -> dict:
    try:
        chunk = orjson.loads(payload)
    except ValueError:
        chunk = _parse_lenient(payload, url)
    if not isinstance(chunk, dict):
        raise ProtocolError(f"{url}: malformed chunk, not a JSON object: {one_line(_text(payload), 80)!r}")
    return chunk


def _parse_lenient(payload: bytes | str, url: str) -> object:
    """What orjson refuses but is JSON all the same: a lone surrogate's escape (`\\ud93f`, a model id a server
    listed, echoed in every chunk). Read by json, on this path only; NaN and Infinity stay refused, as orjson
    refuses them."""
    try:
        return json.loads(payload, parse_constant=_not_json)
    except ValueError:
        raise ProtocolError(f"{url}: malformed chunk, not JSON: {one_line(_text(payload), 80)!r}") from None


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def _check_framing(content_type: str, sse: bool, url: str) -> None:
    content_type = content_type.lower()
    if sse and "event-stream" not in content_type:
        raise ProtocolError(f"{url}: expected an SSE stream, got {content_type or 'no content type'}")
    if not sse and "json" not in content_type:
        raise ProtocolError(f"{url}: expected NDJSON, got {content_type or 'no content type'}")


def _error_message(body: bytes) -> str:
    """The server's own error text from an error body (JSON `error` / `message`, else the text)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return one_line(_text(body), 160)
    if isinstance(parsed, dict):
        error = parsed.get("error", parsed.get("message", parsed.get("detail", "")))
        if isinstance(error, dict):
            error = error.get("message") or error.get("type") or ""
        return one_line(str(error), 160)
    return one_line(str(parsed), 160)


def _text(payload: bytes | str) -> str:
    return payload.decode("utf-8", "replace") if isinstance(payload, bytes) else payload


def _timing(
    request: StreamRequest,
    tally: Tally,
    offsets: list[float],
    texts: list[str],
    sizes: list[int],
    sent_unix: float,
    connect_s: float | None,
    error: str | None,
) -> RequestTiming:
    """Server counts where given, else the client's: prompt from /tokenize or a guess, output = the tokens the chunks
    carried. The chunks are checked against the server's count (`chunk_tokens.settled`)."""
    prompt_tokens = tally.prompt_tokens if tally.prompt_tokens is not None else request.prompt_tokens
    chunks = settled(offsets, sizes, texts, tally.output_tokens, tally.counted_by_usage)
    output_tokens = tally.output_tokens if tally.output_tokens is not None else (sum(sizes) or None)
    estimated = (tally.output_tokens is None and bool(offsets)) or (
        tally.prompt_tokens is None and request.prompt_tokens_estimated
    )
    return RequestTiming(
        ok=error is None,
        t_sent_unix=sent_unix,
        token_offsets_s=chunks.offsets_s,
        connect_s=connect_s,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        tokens_estimated=estimated,
        tokens_per_chunk=chunks.sizes,
        server_split=tally.split or (ServerSplit(cached_tokens=tally.cached_tokens) if tally.cached_tokens is not None else None),
        error=error,
        text="".join(texts),
        completion_id=tally.completion_id,
    )
