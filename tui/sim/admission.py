"""Checks a request must pass before it reaches the engine, worded as vLLM words them."""

from __future__ import annotations

import json
from dataclasses import dataclass

from starlette.requests import Request

from tui.sim import tokenizer


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


def prompt_ids(prompt: object) -> list[int]:
    """A completions prompt: a string, a one-element list of strings, or a list of token ids."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]
    if isinstance(prompt, str):
        ids = tokenizer.encode(prompt)
    elif isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        ids = list(prompt)
    elif isinstance(prompt, list):
        raise ApiError(400, "Batched prompts are not supported by the simulator: send one prompt per request.", param="prompt")
    else:
        raise ApiError(400, "'prompt' must be a string or a list of token ids.", param="prompt")
    if not ids:
        raise ApiError(400, "The prompt cannot be empty.", param="prompt")
    return ids


def chat_prompt_ids(messages: object) -> list[int]:
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise ApiError(400, "'messages' must be a non-empty list of message objects.", param="messages")
    return tokenizer.encode(tokenizer.render_chat(messages))


def admit(ids: list[int], max_tokens: object, max_model_len: int, n: object = 1) -> Admitted:
    """Length checks, then the output length: max_tokens when given, else where the answer ends."""
    if n not in (None, 1):
        raise ApiError(400, "Only n=1 is supported by the simulator.", param="n")
    count = len(ids)
    if count >= max_model_len:
        raise ApiError(
            400,
            f"This model's maximum context length is {max_model_len} tokens. However, your request has "
            f"{count} input tokens. Please reduce the length of the input messages.",
            param="input_tokens",
        )
    seed = tokenizer.request_seed(ids)
    room = max_model_len - count
    if max_tokens is None:
        return Admitted(ids, min(tokenizer.natural_length(seed), room), "stop", seed)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ApiError(400, f"max_tokens must be at least 1, got {max_tokens}.", param="max_tokens")
    if max_tokens > room:
        raise ApiError(
            400,
            f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum context "
            f"length is {max_model_len} tokens and your request has {count} input tokens "
            f"({max_tokens} > {max_model_len} - {count}).",
            param="max_tokens",
        )
    return Admitted(ids, max_tokens, "length", seed)
