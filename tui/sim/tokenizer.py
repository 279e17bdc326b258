"""A deterministic pseudo-tokenizer (a word or a punctuation mark is a token) and readable filler.

The same function counts `/tokenize`, usage and prompt lengths, and generated text re-tokenizes to
exactly the tokens sent, so clients that count tokens themselves agree with the server.
"""

from __future__ import annotations

import math
import random
import re
import zlib

VOCAB_SIZE = 128_256
"""Token ids fall in Llama 3's vocabulary range."""
_TOKEN = re.compile(r"\s*(?:\w{1,12}|[^\w\s])|\s+$")
"""A word of up to 12 letters (longer words split), or one punctuation mark, with leading space."""
_CUT = re.compile(r"\S(?=\W)")
"""A character that ends a token wherever it stands: not a space, and followed by a space or a punctuation mark (a
word's letters never run into either, and a mark is a token of its own)."""

_FILLER = (
    "Prefill reads the whole prompt in one pass , so its cost grows with the prompt . "
    "Decode writes one token per step and reads every weight each time , so memory bandwidth "
    "sets the pace . A longer context adds KV cache to every step . Batching shares one read of "
    "the weights across many streams , which raises throughput and stretches the tail . "
    "Prefix caching keeps the KV cache of a shared prompt , so the second request skips that "
    "prefill . Chunked prefill cuts a long prompt into pieces and mixes them into decode steps . "
    "Quantized weights halve the bytes read per token and nearly double the ceiling ."
).split()
NATURAL_MIN_TOKENS = 48
NATURAL_SPAN_TOKENS = 160
HELD_BACK_EVERY = 11
"""About one generated token in this many ends inside a UTF-8 sequence (see `held_back`)."""


def tokenize(text: str) -> list[str]:
    """The token strings of a text; joining them gives the text back."""
    return _TOKEN.findall(text)


def text_slices(text: str, size: int) -> list[str]:
    """The text in pieces of about `size` characters or more, each cut where a token ends, so that tokenizing piece
    by piece gives the same tokens (a run of letters with no space or mark in it stays whole)."""
    pieces, start = [], 0
    while len(text) - start > size:
        cut = _CUT.search(text, start + size - 1)
        if cut is None:
            break
        pieces.append(text[start:cut.end()])
        start = cut.end()
    pieces.append(text[start:])
    return pieces


def token_id(piece: str) -> int:
    return zlib.crc32(piece.encode()) % VOCAB_SIZE


def encode(text: str) -> list[int]:
    return [token_id(piece) for piece in tokenize(text)]


def count(text: str) -> int:
    return len(tokenize(text))


def render_chat(messages: list[dict]) -> str:
    """The prompt a chat request becomes: one `role: content` line per message, then the answer cue."""
    lines = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):  # OpenAI content parts: keep the text parts
            content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        lines.append(f"<|{message.get('role', 'user')}|> {content or ''}\n")
    return "".join(lines) + "<|assistant|>"


def request_seed(token_ids: list[int]) -> int:
    """A stable seed per prompt, so the same prompt gets the same answer."""
    return zlib.crc32(str(token_ids[-64:]).encode())


def filler_token(seed: int, index: int) -> str:
    """The `index`-th generated token of the answer to a prompt with this seed."""
    word = _FILLER[(seed + index) % len(_FILLER)]
    # A punctuation mark follows its word as written ("pass, so"): no space before it. It still re-tokenizes
    # to the tokens sent (`_TOKEN` takes a mark with or without a leading space).
    return word if index == 0 or not word[0].isalnum() else " " + word


def natural_length(seed: int) -> int:
    """How long the answer runs when the request sets no max_tokens (where a model would stop)."""
    return NATURAL_MIN_TOKENS + seed % NATURAL_SPAN_TOKENS


def held_back(seed: int, index: int) -> bool:
    """Whether this generated token ends inside a multi-byte character, so its text waits for the next.

    Real detokenizers hold such bytes back: the token still goes out as an event, with empty text.
    """
    return (seed + 7 * index) % HELD_BACK_EVERY == HELD_BACK_EVERY - 1


def eos_after(seed: int, probability: float) -> int | None:
    """How many tokens a model that emits EOS with this chance per token writes before it (None: never).

    A geometric draw from a generator seeded by the prompt, so the same request stops at the same place.
    """
    if probability <= 0:
        return None
    if probability >= 1:
        return 0
    uniform = 1.0 - random.Random(seed).random()  # in (0, 1]
    return math.floor(math.log(uniform) / math.log1p(-probability))
