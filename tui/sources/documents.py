"""The documents a server answers about itself (/v1/models, /version, /props, /api/version, /api/tags,
/api/ps), read with the type of every field used checked.

Pure functions over parsed JSON, so each is tested without a socket (and with arbitrary JSON). A field that
is absent or null is None: servers leave out what they lack. A field present with the wrong type is a
`ProtocolError` worded "the server sent X as F where Y was expected": a server that says its model id is 5
is not the server it claims to be, and a guess would be shown in the UI and saved in runs as if true.
Small explicit checks rather than pydantic models: six documents, a few fields each, read once a session.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from tui.core.untrusted import one_line
from tui.sources.errors import ProtocolError

SHOWN_CHARS = 80
"""Longest rendering of a wrong value in a message."""
MAX_COUNT = 2**63 - 1
"""Largest count taken (a context length, a size): Python's JSON reader takes integers of any size, and one of
a thousand digits is not a count."""


@dataclass(frozen=True, slots=True)
class ListedModel:
    """The first model of an OpenAI-compatible `/v1/models` list."""

    id: str | None
    max_model_len: int | None = None
    size_bytes: int | None = None
    """llama.cpp's `meta.size`: the weights' bytes."""
    n_params: int | None = None
    """llama.cpp's `meta.n_params`."""


@dataclass(frozen=True, slots=True)
class LlamacppProps:
    """What llama.cpp's `/props` says about the model it serves."""

    model: str | None
    """The alias, else the file name of the model path."""
    n_ctx: int | None
    build_info: str | None


@dataclass(frozen=True, slots=True)
class OllamaModel:
    """One entry of Ollama's `/api/ps` (loaded) or `/api/tags` (installed)."""

    name: str | None
    context_length: int | None = None


def shape_of(value: object) -> str:
    """What a JSON value is, in words: "a string", "a list", "null"…"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def shown(value: object) -> str:
    """A wrong value for a message: safe (redacted, no control characters), short, strings quoted."""
    return one_line(repr(value) if isinstance(value, str) else value, SHOWN_CHARS)


def wrong_type(where: str, field: str, value: object, expected: str) -> ProtocolError:
    """"<where>: the server sent 5 as data[0].id where a string was expected"."""
    return ProtocolError(f"{where}: the server sent {shown(value)} as {field} where {expected} was expected")


def listed_model(body: object, where: str) -> ListedModel | None:
    """The first entry of `/v1/models` (`{"data": [{"id": …}, …]}`); None when the list is missing or empty."""
    document = _object(body, where, "the answer")
    if document is None:
        return None
    data = _list(document.get("data"), where, "data")
    if not data:
        return None
    first = _object(data[0], where, "data[0]")
    if first is None:
        return None
    meta = _object(first.get("meta"), where, "data[0].meta") or {}
    return ListedModel(
        id=_text(first.get("id"), where, "data[0].id"),
        max_model_len=_count(first.get("max_model_len"), where, "data[0].max_model_len"),
        size_bytes=_count(meta.get("size"), where, "data[0].meta.size") or None,
        n_params=_count(meta.get("n_params"), where, "data[0].meta.n_params") or None,
    )


def version_of(body: object, where: str) -> str | None:
    """The `version` of vLLM's `/version` or Ollama's `/api/version` (a number is taken as its text)."""
    document = _object(body, where, "the answer")
    if document is None:
        return None
    version = document.get("version")
    if isinstance(version, int | float) and not isinstance(version, bool):
        return str(version)
    return _text(version, where, "version")


def llamacpp_props(body: object, where: str) -> LlamacppProps | None:
    """llama.cpp's `/props`: model alias or file, context length, build."""
    document = _object(body, where, "the answer")
    if document is None:
        return None
    settings = _object(document.get("default_generation_settings"), where, "default_generation_settings") or {}
    path = _text(document.get("model_path"), where, "model_path")
    return LlamacppProps(
        model=_text(document.get("model_alias"), where, "model_alias") or (PurePosixPath(path).name if path else None),
        n_ctx=_count(settings.get("n_ctx"), where, "default_generation_settings.n_ctx"),
        build_info=_text(document.get("build_info"), where, "build_info"),
    )


def ollama_first(body: object, where: str) -> OllamaModel | None:
    """The first model of Ollama's `/api/ps` or `/api/tags` (`{"models": [{"name": …}, …]}`)."""
    document = _object(body, where, "the answer")
    if document is None:
        return None
    models = _list(document.get("models"), where, "models")
    if not models:
        return None
    first = _object(models[0], where, "models[0]")
    if first is None:
        return None
    name = _text(first.get("name"), where, "models[0].name") or _text(first.get("model"), where, "models[0].model")
    return OllamaModel(name, _count(first.get("context_length"), where, "models[0].context_length"))


def _object(value: object, where: str, field: str) -> dict | None:
    if value is None or isinstance(value, dict):
        return value
    raise wrong_type(where, field, value, "an object")


def _list(value: object, where: str, field: str) -> list | None:
    if value is None or isinstance(value, list):
        return value
    raise wrong_type(where, field, value, "a list")


def _text(value: object, where: str, field: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise wrong_type(where, field, value, "a string")


def _count(value: object, where: str, field: str) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT):
        return value
    raise wrong_type(where, field, value, "a count (a whole number, 0 or more)")
