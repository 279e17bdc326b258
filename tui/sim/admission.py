"""Checks a request must pass before it reaches the engine, worded as vLLM words them."""

from __future__ import annotations

import json
from dataclasses import dataclass

from starlette.requests import Request

from tui.sim import slices, tokenizer


class ApiError(Exception):
    """An error answer: vLLM's nested `{"error": {...}}` body with this status."""

    def __init__(self, status: int, message: str, kind: str = "BadRequestError", param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.status}}


@dataclass(frozen=True, slots=True)
class Admitted:
    """A request the engine can take: its prompt ids, how many tokens to write, and why it will stop."""

    prompt_ids: list[int]
    max_tokens: int
    finish_reason: str
    seed: int


async def json_body(request: Request) -> dict:
    raw = await request.body()
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ApiError(400, f"Invalid JSON in request body: {error}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    return body


def check_model(requested: object, served: str) -> None:
    if requested is not None and requested != served:
        raise ApiError(404, f"The model `{requested}` does not exist.", "NotFoundError", "model")


async def prompt_ids(prompt: object) -> list[int]:
    """A completions prompt: a string, a one-element list of strings, or a list of token ids (a long one tokenized
    or checked in slices: `slices`)."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]
    if isinstance(prompt, str):
        ids = await slices.encode(prompt)
    elif isinstance(prompt, list) and await slices.all_true(prompt, _is_token_id):
        ids = list(prompt)
    elif isinstance(prompt, list):
        raise ApiError(400, "Batched prompts are not supported by the simulator: send one prompt per request.", param="prompt")
    else:
        raise ApiError(400, "'prompt' must be a string or a list of token ids.", param="prompt")
    if not ids:
        raise ApiError(400, "The prompt cannot be empty.", param="prompt")
    return ids


def chat_text(messages: object) -> str:
    """The prompt a chat request's messages make (`tokenizer.render_chat`), once they are checked."""
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise ApiError(400, "'messages' must be a non-empty list of message objects.", param="messages")
    return tokenizer.render_chat(messages)


async def chat_prompt_ids(messages: object) -> list[int]:
    return await slices.encode(chat_text(messages))


def admit(
    ids: list[int],
    max_tokens: object,
    max_model_len: int,
    n: object = 1,
    *,
    min_tokens: object = 0,
    ignore_eos: object = False,
    eos_probability: float = 0.0,
) -> Admitted:
    """Length checks, then the output length: where the model emits EOS, unless max_tokens comes first.

    The model stops at its natural length when no max_tokens is given, and, with `eos_probability`,
    anywhere; EOS is never sampled before `min_tokens` tokens, and never with `ignore_eos`, as in vLLM.
    """
    if n not in (None, 1):
        raise ApiError(400, "Only n=1 is supported by the simulator.", param="n")
    count = len(ids)
    if count >= max_model_len:
        raise ApiError(
            400,
            f"This model's maximum context length is {max_model_len} tokens. However, your prompt contains "
            f"{count} input tokens, which exceeds this limit even without any output tokens. Please reduce "
            f"the length of the input prompt.",
            param="input_tokens",
        )
    if not isinstance(ignore_eos, bool):
        raise ApiError(400, f"ignore_eos must be a boolean, got {ignore_eos!r}.", param="ignore_eos")
    if not _is_count(min_tokens):
        raise ApiError(400, f"min_tokens must be greater than or equal to 0, got {min_tokens}.", param="min_tokens")
    seed = tokenizer.request_seed(ids)
    room = max_model_len - count
    if max_tokens is not None:
        if not _is_count(max_tokens) or max_tokens < 1:
            raise ApiError(400, f"max_tokens must be at least 1, got {max_tokens}.", param="max_tokens")
        if max_tokens > room:
            raise ApiError(
                400,
                f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum context "
                f"length is {max_model_len} tokens and your request has {count} input tokens "
                f"({max_tokens} > {max_model_len} - {count}).",
                param="max_tokens",
            )
        if min_tokens > max_tokens:
            raise ApiError(400, f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}.",
                           param="min_tokens")
    limit = room if max_tokens is None else max_tokens
    eos_at = None if ignore_eos else _eos_index(seed, max_tokens is None, eos_probability, min_tokens)
    if eos_at is not None and eos_at < limit:
        return Admitted(ids, eos_at + 1, "stop", seed)
    return Admitted(ids, limit, "length", seed)


def _is_token_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _eos_index(seed: int, natural: bool, probability: float, min_tokens: int) -> int | None:
    """The index of the EOS token: the answer's natural end (when unbounded) or a random draw, whichever is first."""
    candidates = []
    if natural:
        candidates.append(max(tokenizer.natural_length(seed) - 1, min_tokens))
    drawn = tokenizer.eos_after(seed, probability)
    if drawn is not None:
        candidates.append(min_tokens + drawn)
    return min(candidates, default=None)
