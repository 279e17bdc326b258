"""Prompts of N tokens, each opened by a unique nonce so prefix caching cannot flatter TTFT.

The server's `/tokenize` (vLLM, llama.cpp) makes N exact; without one the length is a guess and
is marked so until the server's usage tells the truth.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import httpx

FILLER_WORDS = (
    "the quick brown fox jumps over a lazy dog while the small cat sleeps near the warm fire and "
    "old men talk about rain in the green hills of the north where the river runs cold and clear"
).split()
"""Common short words: about one token each in the usual BPE vocabularies."""

MAX_FIT_ROUNDS = 8


@dataclass(frozen=True, slots=True)
class Prompt:
    """A prompt and its length in tokens; `estimated` when no tokenizer counted it."""

    text: str
    tokens: int
    estimated: bool


NONCE_DIGITS = 12


def make_nonce() -> str:
    """A short random marker, unique per prompt, put first so no two prompts share a cached prefix.

    Decimal digits, not hex: today's tokenizers split digits by a fixed rule (Llama 3 in threes, Gemma and
    Qwen one by one), so every nonce costs the same tokens and a prompt fitted once to N tokens stays N
    under a new nonce (measured on llama.cpp's Gemma 3: hex nonces moved a prompt by up to 4 tokens).
    """
    return f"[{secrets.randbelow(10**NONCE_DIGITS):0{NONCE_DIGITS}d}]"


def filler_text(nonce: str, n_words: int) -> str:
    """The nonce followed by `n_words` filler words."""
    words = [FILLER_WORDS[i % len(FILLER_WORDS)] for i in range(max(n_words, 0))]
    return " ".join([nonce, *words])


def estimate_tokens(text: str) -> int:
    """A tokenizer-free guess: about four characters a token, at least one a word."""
    return max(len(text.split()), round(len(text) / 4), 1)


async def count_tokens(client: httpx.AsyncClient, api: str, model: str, text: str) -> int | None:
    """The server's own count of `text`, or None when it has no `/tokenize`.

    vLLM's /tokenize reads `prompt`, llama.cpp's reads `content` (and answers an empty list to
    vLLM's shape): an OpenAI-compatible server that counts nothing for a non-empty text is asked
    again in llama.cpp's shape.
    """
    if api == "openai":
        counted = await _tokenize(client, {"model": model, "prompt": text})
        if counted != 0 or not text:
            return counted
    elif api != "llamacpp":
        return None
    return await _tokenize(client, {"content": text, "add_special": True})  # /completion adds BOS too


async def _tokenize(client: httpx.AsyncClient, body: dict) -> int | None:
    try:
        response = await client.post("/tokenize", json=body)
        if response.status_code != 200:
            return None
        reply = response.json()
    except (httpx.HTTPError, ValueError):
        return None
    if not isinstance(reply, dict):
        return None
    if isinstance(reply.get("count"), int):
        return reply["count"]
    tokens = reply.get("tokens")
    return len(tokens) if isinstance(tokens, list) else None


async def prompt_of(client: httpx.AsyncClient, api: str, model: str, n_tokens: int) -> Prompt:
    """A prompt of `n_tokens` tokens: exact by the server's tokenizer, else estimated."""
    nonce = make_nonce()
    n_words = max(n_tokens - estimate_tokens(nonce), 0)
    text = filler_text(nonce, n_words)
    counted = await count_tokens(client, api, model, text)
    if counted is None:
        return Prompt(text, n_tokens, estimated=True)
    best = Prompt(text, counted, estimated=False)
    for _ in range(MAX_FIT_ROUNDS):
        if counted == n_tokens:
            return best
        n_words = max(n_words + (n_tokens - counted), 0)
        text = filler_text(nonce, n_words)
        counted = await count_tokens(client, api, model, text)
        if counted is None:
            break
        if abs(counted - n_tokens) < abs(best.tokens - n_tokens):
            best = Prompt(text, counted, estimated=False)
    return best
