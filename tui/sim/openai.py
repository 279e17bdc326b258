"""vLLM's OpenAI-compatible routes: /v1/models, /v1/completions, /v1/chat/completions, /tokenize."""

from __future__ import annotations

import functools
import json
import time
import uuid

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tui.sim import slices, tokenizer
from tui.sim.admission import Admitted, ApiError, admit, chat_prompt_ids, chat_text, check_model, json_body, prompt_ids
from tui.sim.engine import TokenEvent
from tui.sim.physics import Sequence
from tui.sim.state import SimState, state_of, tokens
from tui.sim.streaming import TokenStreamResponse, json_text


async def models(request: Request) -> Response:
    options = state_of(request).options
    name = options.served_model_name
    created = int(time.time())
    return JSONResponse({
        "object": "list",
        "data": [{
            "id": name, "object": "model", "created": created, "owned_by": "vllm", "root": name, "parent": None,
            "max_model_len": options.config.model_len,
            "permission": [{
                "id": f"modelperm-{uuid.uuid4().hex}", "object": "model_permission", "created": created,
                "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
                "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False,
                "organization": "*", "group": None, "is_blocking": False,
            }],
        }],
    })


async def completions(request: Request) -> Response:
    return await _generate(request, chat=False)


async def chat_completions(request: Request) -> Response:
    return await _generate(request, chat=True)


async def tokenize(request: Request) -> Response:
    """vLLM's /tokenize; a long prompt is tokenized, and its answer written, a slice at a time (`slices`).

    Each slice's ids and strings become JSON bytes within the slice, so what is left for the end is one join (the
    bytes `JSONResponse` would write of the lists).
    """
    state = state_of(request)
    body = await json_body(request)
    check_model(body.get("model"), state.options.served_model_name)
    if "messages" in body:
        text = chat_text(body["messages"])
    else:
        text = body.get("prompt")
        if not isinstance(text, str):
            raise ApiError(400, "'prompt' must be a string.", param="prompt")
    with_strs = bool(body.get("return_token_strs"))
    parts = [part for part in await slices.in_slices(tokenizer.text_slices(text, slices.SLICE_CHARS),
                                                     functools.partial(_tokenized, with_strs)) if part[0]]
    head = b'{"count":%d,"max_model_len":%d,"tokens":[' % (sum(part[0] for part in parts), state.options.config.model_len)
    pieces = [head, *_listed(part[1] for part in parts), b'],"token_strs":']
    pieces += [b"[", *_listed(part[2] for part in parts), b"]}"] if with_strs else [b"null}"]
    return Response(b"".join(pieces), media_type="application/json")  # one join: each copy of a long answer costs


def _listed(items) -> list[bytes]:
    """JSON lists' items with the commas between them."""
    pieces = []
    for item in items:
        pieces += [b",", item] if pieces else [item]
    return pieces


def _tokenized(with_strs: bool, text: str) -> tuple[int, bytes, bytes]:
    """A slice of the text: its count of tokens, and their ids and strings as JSON (the items, without brackets)."""
    pieces = tokenizer.tokenize(text)
    ids = json.dumps([tokenizer.token_id(piece) for piece in pieces], separators=(",", ":"))[1:-1].encode()
    strs = json.dumps(pieces, ensure_ascii=False, separators=(",", ":"))[1:-1].encode() if with_strs else b""
    return len(pieces), ids, strs


async def _generate(request: Request, chat: bool) -> Response:
    state = state_of(request)
    body = await json_body(request)
    options = state.options
    check_model(body.get("model"), options.served_model_name)
    ids = await chat_prompt_ids(body.get("messages")) if chat else await prompt_ids(body.get("prompt"))
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens")) if chat else body.get("max_tokens")
    admitted = admit(ids, max_tokens, options.config.model_len, body.get("n", 1), min_tokens=body.get("min_tokens", 0),
                     ignore_eos=body.get("ignore_eos", False), eos_probability=options.eos_probability)
    request_id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
    span_id = request_id if chat else f"{request_id}-0"  # vLLM's: a completion's prompt index follows its id
    if body.get("stream"):
        stream_options = body.get("stream_options") or {}
        options_given = isinstance(stream_options, dict)
        include_usage = bool(stream_options.get("include_usage")) if options_given else False
        continuous = include_usage and bool(stream_options.get("continuous_usage_stats"))  # vLLM needs both
        return TokenStreamResponse(state, admitted, "text/event-stream",
                                   _SSE(state, admitted, request_id, chat, include_usage, continuous), span_id)
    return JSONResponse(await _whole(state, admitted, request_id, chat, span_id))


def _usage(state: SimState, admitted: Admitted, completion_tokens: int, cached: int | None) -> dict:
    prompt = len(admitted.prompt_ids)
    usage = {"prompt_tokens": prompt, "total_tokens": prompt + completion_tokens, "completion_tokens": completion_tokens}
    if state.options.enable_prompt_tokens_details:
        usage["prompt_tokens_details"] = {"cached_tokens": cached or 0}
    return usage


def _with_metrics(state: SimState, payload: dict, sequence: Sequence | None) -> dict:
    """With --enable-per-request-metrics, add vLLM's `metrics` to the closing payload."""
    if state.options.enable_per_request_metrics and sequence is not None:
        payload["metrics"] = per_request_metrics(sequence)
    return payload


def per_request_metrics(sequence: Sequence) -> dict:
    """vLLM's per-request timings, in ms, from the engine's own stamps (loop clock, time scale applied).

    TTFT runs from scheduling to the first token (the queue is apart), generation time from the first
    token to the last (n − 1 gaps for n tokens), and tokens per second is every token over scheduling
    to the last token, so it counts the prefill too and is not 1000 / mean_itl_ms.
    """
    scheduled, first, last = sequence.scheduled_at, sequence.first_token_at, sequence.last_token_at
    tokens = sequence.output_tokens
    decode_s = last - first
    inference_s = last - scheduled
    metrics = {
        "time_to_first_token_ms": (first - scheduled) * 1000,
        "generation_time_ms": decode_s * 1000,
        "queue_time_ms": (scheduled - sequence.arrival) * 1000,
        "mean_itl_ms": decode_s / (tokens - 1) * 1000 if tokens > 1 else None,
        "tokens_per_second": tokens / inference_s if inference_s > 0 else None,
    }
    if sequence.kv_transfer_s is not None:  # a disaggregated front's: the pull sits inside time_to_first_token_ms
        metrics["kv_transfer_time_ms"] = sequence.kv_transfer_s * 1000
        metrics["kv_transfer_bytes"] = sequence.kv_transfer_bytes
    return metrics


def _event(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


class _SSE:
    """One SSE event per chunk (a token, or a speculative step's or a stream interval's tokens); the role chunk
    rides with the first, usage and [DONE] with the last.

    A token that `tokenizer.held_back` marks goes out with empty text, and its text rides with the next
    token's, as vLLM's detokenizer does for a token that ends inside a UTF-8 sequence (the last of a chunk of
    several is held back alone). With `continuous_usage` (vLLM's `stream_options.continuous_usage_stats`) every
    event carries usage, `completion_tokens` counting the tokens sent so far, this chunk's included.

    The JSON around each chunk's text is serialised once per request, and the text's JSON comes from a
    cache: a chunk's event is a few byte strings appended to the step's write, nothing serialised.
    """

    def __init__(self, state: SimState, admitted: Admitted, request_id: str, chat: bool, include_usage: bool,
                 continuous_usage: bool = False) -> None:
        self.state = state
        self.admitted = admitted
        self.chat = chat
        self.include_usage = include_usage
        self.seed = admitted.seed
        self.head = head = {"id": request_id, "object": "chat.completion.chunk" if chat else "text_completion",
                            "created": int(time.time()), "model": state.options.served_model_name}
        self.prompt_tokens = len(admitted.prompt_ids)
        self.usage_parts = _usage_template(self.prompt_tokens) if continuous_usage else None
        """The usage each event ends with, around the two counts (`_usage_template`); None without continuous usage."""
        if chat:
            self.before, self.after = _split_template({**head, "choices": [{
                "index": 0, "delta": {"content": _MARK}, "logprobs": None, "finish_reason": None}]}, self.usage_parts)
            role = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
            self.opening = _event({**head, "choices": [role], **self._usage(0)})
        else:
            self.before, self.after = _split_template({**head, "choices": [{
                "index": 0, "text": _MARK, "logprobs": None, "finish_reason": None, "stop_reason": None}]},
                self.usage_parts)
            self.opening = b""
        self.held = ""
        self.finishing = ""
        """The last chunk's text, written with its finish reason by `closing`."""
        self.sent = 0

    def frame(self, events: list[TokenEvent], parts: list[bytes]) -> None:
        if len(events) > 1:
            self._frame_several(events, parts)
            return
        event = events[0]  # a token a chunk: the common case, kept short
        index = event.index
        if index == 0 and self.opening:
            parts.append(self.opening)
        text = tokenizer.filler_token(self.seed, index)
        if self.held:
            text, self.held = self.held + text, ""
        self.sent += 1
        if event.finished:
            self.finishing = text
            return  # its event carries the finish reason: written by `closing`, with the sequence at hand
        if tokenizer.held_back(self.seed, index):
            self.held, text = text, ""
        parts.append(self.before)
        parts.append(json_text(text))
        if self.usage_parts is None:
            parts.append(self.after)
        else:
            self._usage_end(parts)

    def _frame_several(self, events: list[TokenEvent], parts: list[bytes]) -> None:
        """One event for several tokens: their texts joined, a held-back one's riding along, the last one's held
        back alone to the next chunk."""
        seed, last = self.seed, events[-1]
        if events[0].index == 0 and self.opening:
            parts.append(self.opening)
        texts = [tokenizer.filler_token(seed, event.index) for event in events]
        texts[0], self.held = self.held + texts[0], ""
        self.sent += len(events)
        if last.finished:
            self.finishing = "".join(texts)
            return
        if tokenizer.held_back(seed, last.index):
            self.held, texts[-1] = texts[-1], ""
        parts.append(self.before)
        parts.append(json.dumps("".join(texts)).encode())  # not `json_text`: joined texts would fill its cache
        if self.usage_parts is None:
            parts.append(self.after)
        else:
            self._usage_end(parts)

    def _usage_end(self, parts: list[bytes]) -> None:
        """The event's end with continuous usage: the counts so far, this chunk's tokens included."""
        _, between, end = self.usage_parts
        sent = self.sent
        parts += (self.after, b"%d" % sent, between, b"%d" % (self.prompt_tokens + sent), end)

    def closing(self, sequence: Sequence) -> bytes:
        data = _last_chunk(self.head, self.chat, self.finishing, sequence.finish_reason, self._usage(self.sent))
        if self.include_usage:
            usage = {**self.head, "choices": [], "usage": _usage(self.state, self.admitted, self.sent, sequence.cached_tokens)}
            data += _event(_with_metrics(self.state, usage, sequence))
        return data + b"data: [DONE]\n\n"

    def _usage(self, completion_tokens: int) -> dict:
        """An event's usage with continuous usage, as vLLM puts it on every chunk; nothing without."""
        if self.usage_parts is None:
            return {}
        prompt = self.prompt_tokens
        return {"usage": {"prompt_tokens": prompt, "total_tokens": prompt + completion_tokens,
                          "completion_tokens": completion_tokens}}


_COMPLETION_MARK, _TOTAL_MARK = 987654321, 876543219
"""Counts no answer reaches, marking where each chunk's own goes in the usage template."""


def _usage_template(prompt_tokens: int) -> tuple[bytes, bytes, bytes]:
    """The bytes of `,"usage":{…}}` past the choices, around its two counts: (`,"usage":{"prompt_tokens":P,
    "completion_tokens":`, `,"total_tokens":`, `}}` and the event's end), so each chunk's are joined, not serialised.
    The first piece is returned by `_split_template`, joined to what comes after the text."""
    usage = json.dumps({"usage": {"prompt_tokens": prompt_tokens, "completion_tokens": _COMPLETION_MARK,
                                  "total_tokens": _TOTAL_MARK}}, separators=(",", ":"))
    head, _, rest = usage[1:].partition(str(_COMPLETION_MARK))
    between, _, end = rest.partition(str(_TOTAL_MARK))
    return head.encode(), between.encode(), end.encode() + b"\n\n"


_MARK = "\u0000text\u0000"


def _split_template(payload: dict, usage_parts: tuple[bytes, bytes, bytes] | None = None) -> tuple[bytes, bytes]:
    """An event's bytes before and after the token text, from a payload holding `_MARK` as the text; with
    `usage_parts`, "after" ends where the chunk's completion count goes (the payload's closing brace and the event's
    end come with the usage)."""
    before, _, after = _event(payload).partition(json.dumps(_MARK).encode())
    if usage_parts is not None:
        after = after.removesuffix(b"}\n\n") + b"," + usage_parts[0]
    return before, after


def _last_chunk(head: dict, chat: bool, text: str, finish: str, usage: dict) -> bytes:
    if chat:
        choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": finish, "stop_reason": None}
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}
    return _event({**head, "choices": [choice], **usage})


async def _whole(state: SimState, admitted: Admitted, request_id: str, chat: bool, span_id: str) -> dict:
    pieces = []
    sequence = None
    async for stream, event in tokens(state, admitted, span_id):
        pieces.append(tokenizer.filler_token(admitted.seed, event.index))
        sequence = stream.sequence
    text = "".join(pieces)
    finish = sequence.finish_reason if sequence is not None else "length"
    cached = sequence.cached_tokens if sequence is not None else None
    head = {"id": request_id, "created": int(time.time()), "model": state.options.served_model_name}
    if chat:
        message = {"role": "assistant", "content": text, "refusal": None, "annotations": None, "audio": None,
                   "function_call": None, "tool_calls": [], "reasoning": None}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish, "stop_reason": None}
        body = {**head, "object": "chat.completion", "choices": [choice]}
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None,
                  "prompt_logprobs": None}
        body = {**head, "object": "text_completion", "choices": [choice]}
    body["usage"] = _usage(state, admitted, len(pieces), cached)
    return _with_metrics(state, body, sequence)


ROUTES = [
    Route("/v1/models", models, methods=["GET"]),
    Route("/v1/completions", completions, methods=["POST"]),
    Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    Route("/tokenize", tokenize, methods=["POST"]),
]
