"""Text a server sent is untrusted: secrets it echoes are redacted, and what a terminal would act on is made visible.

Two jobs, one module, because every output path needs both:

- `redact` replaces every registered secret (the API key, the password and user:password of a URL) with
  "***". Secrets are registered once, where settings are loaded and URLs given (`register_secret`); every
  path that shows or saves server text (CLI lines and JSON, run files, the UI) calls `redact`, so a server
  that echoes `Authorization: Bearer sk-…` into an error, a model id or a label shows nothing of it.
- `printable` makes control characters (C0 but tab and newline, DEL, C1) and the characters that reorder
  or split lines (bidi overrides, U+2028/9) visible as `\\x1b`-style escapes and caps the length, so a model
  id or error body cannot set a pane title, write the clipboard (OSC 52) or clear the screen.
  `one_line` also folds newlines, tabs and carriage returns into single spaces, for a field or an error
  body inside one line. A lone surrogate (JSON's `\\ud93f`, valid JSON, but no UTF-8 encodes it) is shown
  as that escape too: printed raw it would raise in the terminal's encoder.

JSON output needs no `printable`: the encoder escapes control characters (`\\u001b`) and lone surrogates
itself (json.dumps's ensure_ascii). A file written as UTF-8 by another encoder (orjson: run files) is given
`surrogates_escaped` first.
"""

from __future__ import annotations

import base64
import re
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

REDACTED = "***"
MIN_SECRET_CHARS = 3
"""A shorter "secret" would redact ordinary text everywhere (and guards nothing)."""
MAX_LINE_CHARS = 2000
"""Longest line a server's text makes in phasetop's own output."""
MAX_FIELD_CHARS = 200
"""Longest single field (a model id, a version, a label value) shown from a server."""

_SURROGATES = "\ud800-\udfff"
"""Code points no UTF-8 encodes: a str holds one alone when a server's JSON said `\\ud93f` (or bytes were
decoded with surrogateescape)."""
_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069" + _SURROGATES
_UNSAFE_IN_TEXT = re.compile(f"[{_UNSAFE}]")
_SURROGATE = re.compile(f"[{_SURROGATES}]")
_LINE_BREAKS = re.compile("[\t\n\r\x0b\x0c\u2028\u2029 ]+")
_LINE_ENDS = re.compile("[ \t]*[\n\r\x0b\x0c\u2028\u2029]+[ \t]*")

_secrets: set[str] = set()


def register_secret(value: str | None) -> None:
    """From now on, `redact` hides `value` (and its URL-encoded form) wherever it appears."""
    if value and len(value) >= MIN_SECRET_CHARS:
        _secrets.add(value)
        decoded = unquote(value)
        if decoded != value and len(decoded) >= MIN_SECRET_CHARS:
            _secrets.add(decoded)


def forget_secrets() -> None:
    """Drop every registered secret (tests that set a key and then a different one)."""
    _secrets.clear()


def redact(text: str) -> str:
    """`text` with every registered secret replaced by "***" (the longest first, so none leaves a tail); a
    URL's redacted `user:password@` goes altogether (`http://host`, as `without_credentials` shows it)."""
    for secret in sorted(_secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED).replace(f"://{REDACTED}@", "://")
    return text


def secret_begun(text: str) -> int:
    """How many characters at the end of `text` could be the start of a registered secret: a stream shown
    piece by piece holds those back until the next piece says whether the secret follows."""
    begun = 0
    for secret in _secrets:
        for length in range(min(len(secret) - 1, len(text)), begun, -1):
            if text.endswith(secret[:length]):
                begun = length
                break
    return begun


def redact_all(value: Any) -> Any:
    """`redact` through a JSON-like document: every string in it, keys included."""
    if not _secrets:
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_all(k): redact_all(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_all(v) for v in value]
    return value


def printable(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """`text` redacted, with what a terminal would act on shown as escapes, and cut to `limit` characters."""
    return _capped(_UNSAFE_IN_TEXT.sub(_visible, redact(text)), limit)


def one_line(text: object, limit: int = MAX_FIELD_CHARS) -> str:
    """A server's value as one safe field: `printable`, with every run of line breaks, tabs and spaces one
    space. Any type: a model id that is a number or a list is shown as what it is."""
    flat = _LINE_BREAKS.sub(" ", redact(text if isinstance(text, str) else repr(text))).strip()
    return _capped(_UNSAFE_IN_TEXT.sub(_visible, flat), limit)


def folded(text: str) -> str:
    """`text` with each line break (and the blanks around it) one space: a message made of another's lines
    (an HTTP parser's, with its caret line) as the one line every failure is."""
    return _LINE_ENDS.sub(" ", text).strip()


def surrogates_escaped(value: Any) -> Any:
    """A JSON-like document with every lone surrogate in its strings (keys too) written as the text `\\ud93f`,
    as `one_line` shows it: for an encoder that refuses them (orjson, UTF-8). Anything else is left as it is."""
    if isinstance(value, str):
        return _SURROGATE.sub(_visible, value) if _SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {surrogates_escaped(k): surrogates_escaped(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [surrogates_escaped(v) for v in value]
    return value


def without_credentials(url: str) -> str:
    """`url` without a `user:password@` part, for showing and saving. Not a URL: returned redacted."""
    try:
        parts = urlsplit(url)
        if parts.username is None and parts.password is None:
            return redact(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = host + (f":{parts.port}" if parts.port is not None else "")
    except ValueError:
        return redact(url)
    return redact(urlunsplit(parts._replace(netloc=netloc)))


def register_url_credentials(url: str) -> None:
    """Register the user:password of `url`, the password alone, and the Basic auth header they make (a
    server echoing `Authorization: Basic …` shows them base64-encoded) as secrets."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    if parts.password:
        register_secret(parts.password)
    userinfo = parts.netloc.rpartition("@")[0]
    if userinfo:
        register_secret(userinfo)
        basic = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
        register_secret(base64.b64encode(basic.encode()).decode())


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _capped(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"
