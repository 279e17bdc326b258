"""Which API a server speaks, which model it serves, and what it says about itself.

Probes in SPEC's order: `/api/version` → Ollama, `/props` → llama.cpp, `/v1/models` → OpenAI.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import PurePosixPath

import httpx

from tui.core.untrusted import one_line
from tui.sources.errors import ProtocolError, from_httpx, rejected

API_KINDS = ("openai", "ollama", "llamacpp")

WARM_UP_PATHS = {"openai": "/v1/models", "ollama": "/api/version", "llamacpp": "/health"}
"""A cheap GET per API, used to open the connection before a request is timed."""


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """The `server` object of the probe JSON."""

    kind: str
    url: str
    model: str
    max_model_len: int | None = None
    version: str | None = None
    model_bytes: int | None = None
    """Weight bytes as the server reports them (llama.cpp's /v1/models `meta.size`)."""
    n_params: int | None = None
    """Parameter count as the server reports it (llama.cpp's `meta.n_params`)."""

    def to_json(self) -> dict:
        return asdict(self)


async def detect_api(client: httpx.AsyncClient) -> str:
    """The API the server at the client's base URL speaks; raises ServerUnavailable if nothing answers."""
    if _looks_ollama(await _get_json(client, "/api/version")):
        return "ollama"
    if _looks_llamacpp(await _get_json(client, "/props")):
        return "llamacpp"
    models = await _get_json(client, "/v1/models", strict_auth=True)
    if isinstance(models, dict) and isinstance(models.get("data"), list):
        return "openai"
    raise ProtocolError(
        f"{_base(client)}: no known API answered (/api/version, /props, /v1/models); pass --api openai|ollama|llamacpp"
    )


async def describe_server(client: httpx.AsyncClient, kind: str, model: str | None) -> ServerInfo:
    """Model (the given one, else the server's first), context length and version, as far as the server tells."""
    max_model_len = None
    version = None
    listed: str | None = None
    meta: dict = {}
    if kind == "ollama":
        version = _field(await _get_json(client, "/api/version"), "version")
        loaded = _first(await _get_json(client, "/api/ps"), "models")
        if loaded:
            listed, max_model_len = loaded.get("name") or loaded.get("model"), loaded.get("context_length")
        if not listed and model is None:
            listed = (_first(await _get_json(client, "/api/tags"), "models") or {}).get("name")
    else:
        if kind == "llamacpp":
            props = await _get_json(client, "/props")
            if isinstance(props, dict):
                listed = props.get("model_alias") or _model_file(props.get("model_path"))
                max_model_len = (props.get("default_generation_settings") or {}).get("n_ctx")
                version = props.get("build_info")
        else:
            version = _field(await _get_json(client, "/version"), "version")
        first = _first(await _get_json(client, "/v1/models", strict_auth=model is None), "data")
        if first:
            listed = listed if kind == "llamacpp" and listed else first.get("id")
            max_model_len = first.get("max_model_len") or max_model_len
            meta = first.get("meta") if isinstance(first.get("meta"), dict) else {}
    chosen = model or listed
    if not chosen:
        raise ProtocolError(f"{_base(client)}: the server lists no model; pass --model")
    return ServerInfo(
        kind=kind,
        url=_base(client),
        model=chosen,
        max_model_len=max_model_len if isinstance(max_model_len, int) else None,
        version=one_line(str(version), 80) if version else None,
        model_bytes=_positive_int(meta.get("size")),
        n_params=_positive_int(meta.get("n_params")),
    )


async def _get_json(client: httpx.AsyncClient, path: str, strict_auth: bool = False) -> object:
    """The parsed JSON body of a GET, or None when the path is missing or not JSON.

    Unreachable servers raise; with `strict_auth`, so does a 401/403 (the key is wrong, say so).
    """
    try:
        response = await client.get(path)
    except httpx.HTTPError as error:
        raise from_httpx(error, _base(client) + path) from None
    if response.status_code in (401, 403) and strict_auth:
        raise rejected(response.status_code, _base(client) + path, "")
    if response.status_code != 200:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _looks_ollama(body: object) -> bool:
    return isinstance(body, dict) and isinstance(body.get("version"), str) and "build_info" not in body


def _looks_llamacpp(body: object) -> bool:
    return isinstance(body, dict) and any(k in body for k in ("default_generation_settings", "model_path", "build_info"))


def _first(body: object, key: str) -> dict | None:
    items = body.get(key) if isinstance(body, dict) else None
    return items[0] if isinstance(items, list) and items and isinstance(items[0], dict) else None


def _field(body: object, key: str) -> object:
    return body.get(key) if isinstance(body, dict) else None


def _positive_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _model_file(path: object) -> str | None:
    return PurePosixPath(path).name if isinstance(path, str) and path else None


def _base(client: httpx.AsyncClient) -> str:
    return str(client.base_url).rstrip("/")

