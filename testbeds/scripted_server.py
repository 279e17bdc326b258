"""A scripted HTTP/1.1 server on 127.0.0.1 that plays vLLM, Ollama or llama.cpp with known timing.

Real sockets, hand-written HTTP, so a test can cut the socket mid-stream, go silent or send garbage.
Every streamed chunk is logged with `perf_counter_ns()` taken right after it went to the kernel
(CLOCK_MONOTONIC on Linux, so a client in another process can compare its own stamps).

In a test: `ScriptedServer(Script(kind="ollama")).start()` runs it on a thread; a hostile server is the
same one with `Script.replies` (any path answered with exactly the bytes, status, headers and pace a
test gives: escape-laden ids, an echoed API key, a gzip bomb, a byte a second) and `Script.stream`
(the raw lines of a generation's stream; see tests/hostile.py for named scenarios); as a process
(the fidelity benchmark): `python testbeds/scripted_server.py --tokens 64 --itl 0.01`, which prints its
URL and serves `GET /_log` (the write log as JSON; `GET /_log/take` hands it over and starts a new one).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
import gzip
from dataclasses import dataclass, field
from time import perf_counter_ns

GENERATION_PATHS = {"/v1/completions", "/v1/chat/completions", "/api/generate", "/api/chat", "/completion"}
CHAT_TEMPLATE_TOKENS = 5
"""Tokens the pretend chat template adds around a message."""


@dataclass
class Reply:
    """One hostile (or just odd) answer to a path, whatever the method; it wins over everything else.

    `body` may be bytes, text, or a JSON-able object; "{auth}" in it (text or JSON) becomes the request's
    Authorization header, as a server that echoes credentials would do.
    """

    body: object = b""
    status: int = 200
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    gzip: bool = False
    """Send the body gzip-compressed with Content-Encoding: gzip (a small bomb inflates huge)."""
    drip_s: float | None = None
    """Send the body one byte every drip_s seconds, after a Content-Length that promises all of it."""
    drip_head: bool = False
    """With drip_s: the status line and headers go a byte at a time too (a head that never completes in time)."""

    def encoded(self, authorization: str) -> bytes:
        if isinstance(self.body, bytes):
            data = self.body
        elif isinstance(self.body, str):
            data = self.body.encode()
        else:
            data = json.dumps(self.body).encode()
        return data.replace(b"{auth}", authorization.encode())


@dataclass
class Script:
    """What the server plays next; tests change it between requests."""

    kind: str = "openai"
    """"openai" (vLLM), "ollama" or "llamacpp"."""
    model: str = "scripted-model"
    tokens: list[str] = field(default_factory=lambda: ["Hello", ",", " world", "!", " How", " are", " you", "?"])
    ttft_s: float = 0.05
    """Delay from the request's arrival to the first token."""
    itl_s: float = 0.01
    """Delay between tokens."""
    role_chunk: bool = True
    """Chat: send the role-only opening chunk at once, well before the first token."""
    usage: bool = True
    """Send usage / counters; off makes the client count chunks."""
    timings: bool = True
    """llama.cpp: `timings` on the final chunk (native and OpenAI-compatible)."""
    vllm_metrics: bool = False
    """vLLM: per-request `metrics` on the usage chunk."""
    load_duration_ns: int = 0
    cache_n: int = 3
    api_key: str | None = None
    """When set, generation and /v1 paths need `Authorization: Bearer <key>`."""
    fault: str | None = None
    """None, "status", "not_sse", "not_json", "malformed", "error_event", "cut", "silence"."""
    fault_from_request: int = 1
    """The first generation request (1-based) that gets the fault; earlier ones are served well."""
    fault_after: int = 2
    """Tokens sent before a mid-stream fault."""
    status: int = 500
    status_message: str = "internal error"
    silence_s: float = 5.0
    max_model_len: int = 4096
    tokenizer: str = "words"
    """"words" (see `count_tokens`) or "small-vocab" (see `count_small_vocab`)."""
    replies: dict[str, Reply] = field(default_factory=dict)
    """Path → the exact answer to give it (before the API key is checked)."""
    stream: list[bytes] | None = None
    """A generation's stream body as raw lines (each framed as one HTTP chunk, `stream_gap_s` apart), in
    place of the scripted tokens: malformed chunks, odd shapes. The stream ends after the last line."""
    stream_gap_s: float = 0.01


@dataclass
class RequestLog:
    """One request as the server saw it: when it arrived, when each chunk was written."""

    path: str
    nonce: str
    body: dict
    received_ns: int
    """perf_counter_ns when the request's first bytes reached the server's process."""
    content_write_ns: list[int] = field(default_factory=list)
    """perf_counter_ns just after each chunk carrying text went to the socket."""
    hung_up_ns: int | None = None
    """perf_counter_ns when the server found the client had closed the connection mid-answer (checked before each token)."""


def count_tokens(text: str, tokenizer: str = "words") -> int:
    """The pretend tokenizer: a token per word, two for a word longer than six characters."""
    if tokenizer == "small-vocab":
        return count_small_vocab(text)
    return sum(2 if len(word) > 6 else 1 for word in text.split())


def count_small_vocab(text: str) -> int:
    """A pretend small vocabulary, like real vLLM's tiny BPE: a token per three letters of a word (about
    1.7 per filler word) and a nonce whose cost depends on its digits (2 plus one per digit above 4)."""
    total = 0
    for word in text.split():
        if word.startswith("[") and word.endswith("]") and word[1:-1].isdigit():
            total += 2 + sum(digit > "4" for digit in word[1:-1])
        else:
            total += -(-len(word) // 3)
    return total


class _ArrivalReader(asyncio.StreamReader):
    """Stamps when bytes arrive into an empty buffer (a request's first), in the protocol's data_received,
    before any task wakes for them: a busy server's own wake-up latency stays out of the ground truth."""

    arrived_ns = 0

    def feed_data(self, data: bytes) -> None:
        if not self._buffer:
            self.arrived_ns = perf_counter_ns()
        super().feed_data(data)


class ScriptedServer:
    """The server; `log` holds a RequestLog per generation request."""

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        self.log: list[RequestLog] = []
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def serve(self, port: int = 0) -> None:
        loop = asyncio.get_running_loop()

        def connection() -> asyncio.StreamReaderProtocol:
            return asyncio.StreamReaderProtocol(_ArrivalReader(limit=2**16, loop=loop), self._handle, loop=loop)

        self._server = await loop.create_server(connection, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]

    def start(self) -> ScriptedServer:
        """Serve on a thread with its own event loop; returns once the port is bound."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.serve(), self._loop).result(5)
        return self

    def stop(self) -> None:
        if self._loop is None:
            return

        async def close() -> None:
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                first = await reader.read(1)
                if not first:
                    return
                received_ns = reader.arrived_ns  # the bytes' arrival, not this task's wake-up after it
                if not first.isalpha():  # not HTTP (a TLS hello, say): answer as a plain server would
                    writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    await writer.drain()
                    return
                head = first + await reader.readuntil(b"\r\n\r\n")
                method, path, headers = _parse_head(head)
                length = int(headers.get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                if not await self._respond(method, path, headers, body, received_ns, writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            return
        finally:
            writer.close()

    async def _respond(self, method: str, path: str, headers: dict, body: bytes, received_ns: int, writer) -> bool:
        """Answer one request; False when the connection must close."""
        s = self.script
        if path in s.replies:
            return await _reply(s.replies[path], headers.get("authorization", ""), writer)
        if s.api_key is not None and (path.startswith("/v1") or path in GENERATION_PATHS or path == "/props"):
            if headers.get("authorization") != f"Bearer {s.api_key}":
                _send_json(writer, 401, {"error": "Unauthorized"})
                return True
        if method == "GET":
            reply = self._get(path)
            _send_json(writer, 200 if reply is not None else 404, reply if reply is not None else {"error": "not found"})
            return True
        request = json.loads(body or b"{}")
        if path == "/tokenize" and s.kind in ("openai", "llamacpp"):
            text = request.get("prompt") or request.get("content") or ""
            n = count_tokens(text, s.tokenizer)
            _send_json(writer, 200, {"count": n, "tokens": list(range(n))} if s.kind == "openai" else {"tokens": list(range(n))})
            return True
        if path not in _paths_of(s.kind):
            _send_json(writer, 404, {"error": f"no route {path}"})
            return True
        entry = RequestLog(path, _nonce(request), request, received_ns)
        self.log.append(entry)
        if s.stream is not None:
            return await _raw_stream(s.stream, s.stream_gap_s, path.startswith("/api/"), writer)
        faulty = s.fault is not None and len(self.log) >= s.fault_from_request
        return await _Stream(s, path, request, entry, writer, faulty).play()

    def _get(self, path: str) -> object:
        s = self.script
        if path == "/_log":
            return [vars(entry) for entry in self.log]
        if path == "/_log/take":  # the log so far, then a fresh one: a long benchmark's log stays small
            taken, self.log = self.log, []
            return [vars(entry) for entry in taken]
        models = {"object": "list", "data": [{"id": s.model, "object": "model", "max_model_len": s.max_model_len}]}
        table = {
            "openai": {"/v1/models": models, "/version": {"version": "0.33.0"}, "/health": {}},
            "ollama": {
                "/api/version": {"version": "0.9.0"},
                "/api/tags": {"models": [{"name": s.model, "model": s.model}]},
                "/api/ps": {"models": [{"name": s.model, "model": s.model, "context_length": s.max_model_len}]},
                "/v1/models": {"object": "list", "data": [{"id": s.model, "object": "model"}]},
            },
            "llamacpp": {
                "/props": {"model_alias": s.model, "default_generation_settings": {"n_ctx": s.max_model_len}, "build_info": "b9999"},
                "/v1/models": models,
                "/health": {"status": "ok"},
            },
        }
        return table[s.kind].get(path)


class _Stream:
    """Plays one streamed answer, faults included."""

    def __init__(self, script: Script, path: str, request: dict, entry: RequestLog, writer, faulty: bool) -> None:
        self.s, self.path, self.request, self.entry, self.writer = script, path, request, entry, writer
        self.fault = script.fault if faulty else None
        self.chat = path in ("/v1/chat/completions", "/api/chat")
        self.prompt_tokens = count_tokens(_prompt_text(request), script.tokenizer) + (CHAT_TEMPLATE_TOKENS if self.chat else 0)

    async def play(self) -> bool:
        s, loop = self.s, asyncio.get_running_loop()
        if self.fault == "status":
            _send_json(self.writer, s.status, {"error": {"message": s.status_message, "type": "Error", "code": s.status}})
            return True
        if self.fault == "not_sse":
            _send(self.writer, 200, "text/html", b"<html><body>It works!</body></html>")
            return True
        ndjson = self.path.startswith("/api/")
        self.writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: "
            + (b"application/x-ndjson" if ndjson else b"text/event-stream")
            + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        if self.chat and s.role_chunk and s.kind != "ollama":
            self._chunk(self._openai({"role": "assistant", "content": ""}), content=False)
        if self.fault == "not_json":
            self._chunk(b"this is not json\n" if ndjson else b"data: this is not json\n\n", content=False)
        start = loop.time()
        for i, token in enumerate(s.tokens):
            await asyncio.sleep(max(0.0, start + s.ttft_s + i * s.itl_s - loop.time()))
            if self.writer.transport.is_closing():  # the client hung up: stop quietly
                self.entry.hung_up_ns = perf_counter_ns()
                return False
            if i == s.fault_after and self.fault in ("malformed", "error_event", "cut", "silence"):
                return await self._fault()
            last = i == len(s.tokens) - 1
            self._chunk(self._token(token, last))
        self._chunk(self._final(), content=False)
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()
        return True

    async def _fault(self) -> bool:
        s = self.s
        if self.fault in ("malformed", "error_event"):
            bad = b'{"choices": [{"text": "x"' if self.fault == "malformed" else b'{"error": {"message": "engine died", "code": 500}}'
            self._chunk(b"data: " + bad + b"\n\ndata: [DONE]\n\n", content=False)
            self.writer.write(b"0\r\n\r\n")
            await self.writer.drain()
            return True
        if self.fault == "silence":
            await self.writer.drain()
            await asyncio.sleep(s.silence_s)
        await self.writer.drain()
        self.writer.transport.abort()  # the socket dies mid-answer: no terminating chunk
        return False

    def _chunk(self, data: bytes, content: bool = True) -> None:
        self.writer.write(b"%x\r\n%b\r\n" % (len(data), data))
        if content:
            # Stamped after the write: the bytes are in the kernel (asyncio sends at once when it can).
            self.entry.content_write_ns.append(perf_counter_ns())

    def _token(self, token: str, last: bool) -> bytes:
        s = self.s
        if self.path.startswith("/api/"):
            obj = {"model": s.model, "created_at": _now_rfc3339(), "done": False}
            obj |= {"message": {"role": "assistant", "content": token}} if self.chat else {"response": token}
            return json.dumps(obj).encode() + b"\n"
        if self.path == "/completion":
            return _sse({"content": token, "stop": False})
        if self.chat:
            return self._openai({"content": token}, finish="length" if last else None)
        return _sse({"id": "cmpl-1", "object": "text_completion", "model": s.model,
                     "choices": [{"index": 0, "text": token, "finish_reason": "length" if last else None}]})

    def _openai(self, delta: dict, finish: str | None = None) -> bytes:
        return _sse({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": self.s.model,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    def _final(self) -> bytes:
        s, n = self.s, len(self.s.tokens)
        timings = {"prompt_n": self.prompt_tokens - s.cache_n, "prompt_ms": s.ttft_s * 1000, "cache_n": s.cache_n,
                   "predicted_n": n, "predicted_ms": s.itl_s * n * 1000}
        if self.path.startswith("/api/"):
            done = {"model": s.model, "created_at": _now_rfc3339(), "done": True, "done_reason": "length"}
            if self.chat:
                done["message"] = {"role": "assistant", "content": ""}
            else:
                done["response"] = ""
            if s.usage:
                done |= {"total_duration": int((s.ttft_s + s.itl_s * n) * 1e9), "load_duration": s.load_duration_ns,
                         "prompt_eval_count": self.prompt_tokens, "prompt_eval_duration": int(s.ttft_s * 1e9),
                         "eval_count": n, "eval_duration": int(s.itl_s * n * 1e9)}
            return json.dumps(done).encode() + b"\n"
        if self.path == "/completion":
            final = {"content": "", "stop": True, "stop_type": "limit"}
            if s.usage:
                final |= {"tokens_evaluated": self.prompt_tokens, "tokens_predicted": n}
            if s.timings:
                final["timings"] = timings
            return _sse(final)
        usage_chunk: dict = {"id": "x", "object": "chat.completion.chunk", "model": s.model, "choices": []}
        if s.usage:
            usage_chunk["usage"] = {"prompt_tokens": self.prompt_tokens, "completion_tokens": n,
                                    "total_tokens": self.prompt_tokens + n}
        if s.kind == "llamacpp" and s.timings:
            usage_chunk["timings"] = timings
        if s.vllm_metrics:
            usage_chunk["metrics"] = {"time_to_first_token_ms": s.ttft_s * 1000, "generation_time_ms": s.itl_s * (n - 1) * 1000,
                                      "queue_time_ms": 0.1, "mean_itl_ms": s.itl_s * 1000}
        extra = s.usage or "timings" in usage_chunk or "metrics" in usage_chunk
        return (_sse(usage_chunk) if extra else b"") + b"data: [DONE]\n\n"


async def _reply(reply: Reply, authorization: str, writer) -> bool:
    body = reply.encoded(authorization)
    headers = {"Content-Type": reply.content_type, **reply.headers}
    if reply.gzip:
        body = gzip.compress(body, compresslevel=9)
        headers["Content-Encoding"] = "gzip"
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    head = f"HTTP/1.1 {reply.status} X\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode()
    if reply.drip_s is None:
        writer.write(head + body)
    else:
        dripped = head + body if reply.drip_head else body
        if not reply.drip_head:
            writer.write(head)
        for i in range(len(dripped)):
            if writer.transport.is_closing():
                return False
            writer.write(dripped[i:i + 1])
            await writer.drain()
            await asyncio.sleep(reply.drip_s)
    await writer.drain()
    return True


async def _raw_stream(lines: list[bytes], gap_s: float, ndjson: bool, writer) -> bool:
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: "
        + (b"application/x-ndjson" if ndjson else b"text/event-stream")
        + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    for line in lines:
        await asyncio.sleep(gap_s)
        if writer.transport.is_closing():
            return False
        writer.write(b"%x\r\n%b\r\n" % (len(line), line))
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    return True


def _paths_of(kind: str) -> set[str]:
    return {
        "openai": {"/v1/completions", "/v1/chat/completions"},
        "ollama": {"/api/generate", "/api/chat", "/v1/completions", "/v1/chat/completions"},
        "llamacpp": {"/completion", "/v1/completions", "/v1/chat/completions"},
    }[kind]


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return method, path.split("?")[0], headers


def _prompt_text(request: dict) -> str:
    if "messages" in request:
        return " ".join(m.get("content", "") for m in request["messages"])
    return request.get("prompt") or request.get("content") or ""


def _nonce(request: dict) -> str:
    words = _prompt_text(request).split()
    return words[0] if words else ""


def _sse(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _send_json(writer, status: int, obj: object) -> None:
    _send(writer, status, "application/json", json.dumps(obj).encode())


def _send(writer, status: int, content_type: str, body: bytes) -> None:
    writer.write(
        f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
    )


def _now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + ".000000000Z"


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve a scripted stream until killed (for bench/fidelity.py).")
    parser.add_argument("--kind", default="openai", choices=("openai", "ollama", "llamacpp"))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--ttft", type=float, default=0.02, help="seconds from arrival to the first token")
    parser.add_argument("--itl", type=float, default=0.01, help="seconds between tokens")
    parser.add_argument("--uvloop", action="store_true", help="serve on uvloop: less of the server's own CPU per token")
    args = parser.parse_args()
    script = Script(kind=args.kind, tokens=[f" t{i}" for i in range(args.tokens)], ttft_s=args.ttft, itl_s=args.itl)
    server = ScriptedServer(script)

    async def serve() -> None:
        await server.serve(args.port)
        print(server.url, flush=True)
        await asyncio.Event().wait()

    if args.uvloop:
        import uvloop

        uvloop.run(serve())
    else:
        asyncio.run(serve())


if __name__ == "__main__":
    main()
