"""Prompts of N tokens, each opened by a unique nonce so prefix caching cannot flatter TTFT.

The server's `/tokenize` (vLLM, llama.cpp) makes N exact; without one the length is a guess and
is marked so until the server's usage tells the truth.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

import httpx

from tui.sources.http import JSON_HEADERS, json_body

FILLER_WORDS = (
    "the quick brown fox jumps over a lazy dog while the small cat sleeps near the warm fire and "
    "old men talk about rain in the green hills of the north where the river runs cold and clear"
).split()
"""Common short words: one token each in large BPE vocabularies, two or more in small ones (the fit measures it)."""

MAX_FIT_ROUNDS = 12
"""Word-count guesses before the pad pieces; the secant on the measured rate needs 3–5 on usual tokenizers."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """A prompt and its length in tokens; `estimated` when no tokenizer counted it."""

    text: str
    tokens: int
    estimated: bool
    shape: "_Shape | None" = field(default=None, repr=False, compare=False)
    """How the filler was built, so `refit` can fit the same length under a new nonce in a call or two."""


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
        response = await client.post("/tokenize", content=json_body(body), headers=JSON_HEADERS)
        if response.status_code != 200:
            return None
        reply = response.json()
    except (httpx.HTTPError, ValueError):
        return None
    # An answer of another shape counts nothing: the prompt's length is then estimated, and marked so.
    if not isinstance(reply, dict):
        return None
    count = reply.get("count")
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        return count
    tokens = reply.get("tokens")
    return len(tokens) if isinstance(tokens, list) else None


@dataclass(frozen=True, slots=True)
class _Shape:
    """How a fitted prompt is built: filler words after the nonce, then `pad` copies of `pad_piece`."""

    n_words: int
    pad: int = 0
    pad_piece: str | None = None

    def text(self, nonce: str) -> str:
        return filler_text(nonce, self.n_words) + (self.pad_piece or "") * self.pad


PAD_PIECES = (" .", " a", ",", " ,", ".", " I", " x", "!")
"""Short tails, one of which is one token per copy in most vocabularies: they close the last gap that a
whole filler word (1–3 tokens, depending on the tokenizer) would overshoot."""


async def prompt_of(client: httpx.AsyncClient, api: str, model: str, n_tokens: int) -> Prompt:
    """A prompt of `n_tokens` tokens under a fresh nonce: exact by the server's tokenizer, else estimated.

    Any tokenizer: the words-per-token rate is measured from the server's counts and refined by secant
    steps until whole words come within a word of N; short pad pieces close the rest. When N cannot be
    hit (shorter than the nonce, or no pad piece adds one token), the closest length is returned and
    `Prompt.tokens` says what it is.
    """
    nonce = make_nonce()
    return await _fitted(client, api, model, nonce, n_tokens, _Shape(max(n_tokens - estimate_tokens(nonce), 0)))


async def refit(client: httpx.AsyncClient, api: str, model: str, template: Prompt, n_tokens: int) -> Prompt:
    """A prompt like `template` under a fresh nonce, fitted again to `n_tokens` (nonces differ in tokens on
    small vocabularies: 6 to 11 on real vLLM's tiny BPE), starting from the template's shape."""
    nonce = make_nonce()
    shape = template.shape or _Shape(n_tokens)
    if template.estimated:
        return Prompt(shape.text(nonce), template.tokens, estimated=True, shape=shape)
    return await _fitted(client, api, model, nonce, n_tokens, shape)


async def _fitted(client: httpx.AsyncClient, api: str, model: str, nonce: str, n_tokens: int, start: _Shape) -> Prompt:
    counted = await count_tokens(client, api, model, start.text(nonce))
    if counted is None:
        return Prompt(start.text(nonce), n_tokens, estimated=True, shape=start)
    return await _fit(client, api, model, nonce, n_tokens, start, counted)


async def _fit(client: httpx.AsyncClient, api: str, model: str, nonce: str, target: int, shape: _Shape, counted: int) -> Prompt:
    async def count(candidate: _Shape) -> int | None:
        return await count_tokens(client, api, model, candidate.text(nonce))

    best = Prompt(shape.text(nonce), counted, estimated=False, shape=shape)
    if counted == target:
        return best
    if shape.pad:  # the words are fitted bare, then padded again
        shape = _Shape(shape.n_words)
        bare = await count(shape)
        if bare is None:
            return best
        counted = bare
    # Whole words: the largest count at or under the target, by secant steps on the measured rate.
    points = {shape.n_words: counted}
    below: tuple[int, int] | None = (shape.n_words, counted) if counted <= target else None
    above: tuple[int, int] | None = (shape.n_words, counted) if counted > target else None
    rate = max(counted / max(shape.n_words, 1), 0.05)
    n_words = shape.n_words
    for _ in range(MAX_FIT_ROUNDS):
        if below and (below[1] == target or (above and above[0] - below[0] <= 1)):
            break
        step = (target - points[n_words]) / rate
        n_words = max(n_words + (int(step) if step > 0 else min(int(step) - 1, -1)), 0)
        if below and above:
            n_words = min(max(n_words, below[0] + 1), above[0] - 1)  # stay strictly inside the bracket
        if n_words in points:
            n_words = (below[0] + 1) if below else max(n_words - 1, 0)
            if n_words in points:
                break
        got = await count(_Shape(n_words))
        if got is None:
            return best
        points[n_words] = got
        if got <= target and (below is None or got > below[1]):
            below = (n_words, got)
        if got > target and (above is None or n_words < above[0]):
            above = (n_words, got)
        if abs(got - target) < abs(best.tokens - target):
            best = Prompt(_Shape(n_words).text(nonce), got, estimated=False, shape=_Shape(n_words))
        (n1, c1), (n2, c2) = _two_nearest(points, target)
        if n1 != n2 and c1 != c2:
            rate = max((c2 - c1) / (n2 - n1), 0.05)
    if below is None or below[1] == target:
        return best if below is None else Prompt(_Shape(below[0]).text(nonce), below[1], estimated=False, shape=_Shape(below[0]))
    # Close the last few tokens with a pad piece that the server counts as exactly one token a copy.
    deficit = target - below[1]
    for piece in PAD_PIECES:
        padded = _Shape(below[0], deficit, piece)
        got = await count(padded)
        if got == target:
            return Prompt(padded.text(nonce), got, estimated=False, shape=padded)
        if got is None:
            break
    return best


def _two_nearest(points: dict[int, int], target: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The two measured (words, tokens) points whose counts lie closest to the target, for the secant."""
    ranked = sorted(points.items(), key=lambda point: abs(point[1] - target))
    return ranked[0], ranked[min(1, len(ranked) - 1)]
