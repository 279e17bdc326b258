"""Ollama's native routes (`--api ollama`): NDJSON streams whose last object carries the phase counters."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tui.sim import slices, tokenizer
from tui.sim.admission import Admitted, ApiError, admit, chat_prompt_ids, json_body
from tui.sim.options import OLLAMA_VERSION
from tui.sim.engine import TokenEvent, now
from tui.sim.physics import Sequence
from tui.sim.state import SimState, state_of, tokens
from tui.sim.streaming import TokenStreamResponse, json_text

_QUANT_LEVEL = {16: "F16", 8: "Q8_0", 4: "Q4_K_M"}
_DIGEST = "sha256:" + "5" * 64


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _details(state: SimState) -> dict:
    config = state.options.config
    return {"parent_model": "", "format": "gguf", "family": "llama", "families": ["llama"],
            "parameter_size": f"{config.layout.params / 1e9:.1f}B", "quantization_level": _QUANT_LEVEL.get(config.bits, "F16")}


def _model_entry(state: SimState) -> dict:
    name = state.options.served_model_name
    return {"name": name, "model": name, "size": int(state.options.config.weight_bytes), "digest": _DIGEST,
            "details": _details(state)}


async def root(request: Request) -> Response:
    return PlainTextResponse("Ollama is running")


async def version(request: Request) -> Response:
    return JSONResponse({"version": OLLAMA_VERSION})


async def tags(request: Request) -> Response:
    return JSONResponse({"models": [{**_model_entry(state_of(request)), "modified_at": _now()}]})


async def ps(request: Request) -> Response:
    state = state_of(request)
    expires = (datetime.now(UTC) + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    entry = {**_model_entry(state), "expires_at": expires, "size_vram": int(state.options.config.weight_bytes),
             "context_length": state.options.config.model_len}
    return JSONResponse({"models": [entry]})


async def generate(request: Request) -> Response:
    return await _answer(request, chat=False)


async def chat(request: Request) -> Response:
    return await _answer(request, chat=True)


async def _answer(request: Request, chat: bool) -> Response:
    received = now()
    state = state_of(request)
    try:
        body = await json_body(request)
        name = state.options.served_model_name
        if body.get("model") not in (None, name):
            return JSONResponse({"error": f"model '{body.get('model')}' not found"}, status_code=404)
        if not chat and not body.get("prompt"):
            return JSONResponse({"model": name, "created_at": _now(), "response": "", "done": True, "done_reason": "load"})
        ids = await chat_prompt_ids(body.get("messages")) if chat else await slices.encode(str(body["prompt"]))
        options = body.get("options") if isinstance(body.get("options"), dict) else {}
        predict = options.get("num_predict")
        admitted = admit(ids, None if predict in (None, -1) else predict, state.options.config.model_len)
    except ApiError as error:
        return JSONResponse({"error": error.message}, status_code=error.status)
    if body.get("stream", True):
        return TokenStreamResponse(state, admitted, "application/x-ndjson", _NDJSON(state, admitted, chat, received))
    lines = _lines(state, admitted, chat, received)
    return JSONResponse(await _merge([json.loads(line) async for line in lines], chat))


class _NDJSON:
    """A streamed answer's lines: the JSON around `created_at` and the text is serialised once per request."""

    def __init__(self, state: SimState, admitted: Admitted, chat: bool, received: float) -> None:
        self.state = state
        self.seed = admitted.seed
        self.chat = chat
        self.received = received
        piece = {"message": {"role": "assistant", "content": _TEXT}} if chat else {"response": _TEXT}
        template = _line({"model": state.options.served_model_name, "created_at": _CREATED, **piece, "done": False})
        self.head, rest = template.split(json.dumps(_CREATED).encode())
        self.middle, self.tail = rest.split(json.dumps(_TEXT).encode())

    def frame(self, events: list[TokenEvent], parts: list[bytes]) -> None:
        for event in events:  # Ollama writes a line a token
            text = tokenizer.filler_token(self.seed, event.index)
            parts += (self.head, _created_at(event.due), self.middle, json_text(text), self.tail)

    def closing(self, sequence: Sequence) -> bytes:
        return _final_line(self.state, sequence, self.chat, self.received)


_STAMP: list = [None, b""]


def _created_at(due: float) -> bytes:
    """`_now()` as JSON, taken once per engine step: the lines of every stream written for one step
    share the wall-clock moment the first of them was written (formatting a datetime costs ~4 µs)."""
    if _STAMP[0] != due:
        _STAMP[0], _STAMP[1] = due, json.dumps(_now()).encode()
    return _STAMP[1]


_TEXT = "\u0000text\u0000"
_CREATED = "\u0000created\u0000"


async def _lines(state: SimState, admitted: Admitted, chat: bool, received: float) -> AsyncIterator[bytes]:
    """One JSON line per token; the last (`done: true`) has the counters, in integer nanoseconds."""
    name = state.options.served_model_name
    sequence = None
    async for stream, event in tokens(state, admitted):
        sequence = stream.sequence
        text = tokenizer.filler_token(admitted.seed, event.index)
        piece = {"message": {"role": "assistant", "content": text}} if chat else {"response": text}
        yield _line({"model": name, "created_at": _now(), **piece, "done": False})
    if sequence is None:
        return
    yield _final_line(state, sequence, chat, received)


def _final_line(state: SimState, sequence: Sequence, chat: bool, received: float) -> bytes:
    """The `done: true` line, with the counters in integer nanoseconds."""
    end = sequence.last_token_at
    ns = 1e9
    final = {
        "model": state.options.served_model_name, "created_at": _now(),
        **({"message": {"role": "assistant", "content": ""}} if chat else {"response": ""}),
        "done": True, "done_reason": "stop" if sequence.finish_reason == "stop" else "length",
        "total_duration": int((end - received) * ns),
        "load_duration": max(1, int((sequence.arrival - received) * ns)),
        "prompt_eval_count": sequence.prompt_tokens,
        "prompt_eval_duration": int((sequence.first_token_at - sequence.scheduled_at) * ns),
        "eval_count": sequence.output_tokens,
        "eval_duration": int((end - sequence.first_token_at) * ns),
    }
    if not chat:
        final["context"] = []
    return _line(final)


def _line(payload: dict) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode() + b"\n"


async def _merge(objects: list[dict], chat: bool) -> dict:
    """The non-streaming answer: the final object with the whole text in it."""
    final = dict(objects[-1])
    text = "".join(o["message"]["content"] if chat else o["response"] for o in objects[:-1])
    if chat:
        final["message"] = {"role": "assistant", "content": text}
    else:
        final["response"] = text
    return final


ROUTES = [
    Route("/", root, methods=["GET", "HEAD"]),
    Route("/api/version", version, methods=["GET"]),
    Route("/api/tags", tags, methods=["GET"]),
    Route("/api/ps", ps, methods=["GET"]),
    Route("/api/generate", generate, methods=["POST"]),
    Route("/api/chat", chat, methods=["POST"]),
]
