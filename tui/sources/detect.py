"""Which API a server speaks, which model it serves, and what it says about itself.

Probes in SPEC's order: `/api/version` → Ollama, `/props` → llama.cpp, `/v1/models` → OpenAI.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import httpx

from tui.core.untrusted import one_line, without_credentials
from tui.sources.documents import listed_model, llamacpp_props, ollama_first, version_of
from tui.sources.errors import ProtocolError, ServerUnavailable, from_httpx, rejected

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
        """As in the JSON contracts; the URL without credentials (they are the user's, not the server's)."""
        return {**asdict(self), "url": without_credentials(self.url)}


async def detect_api(client: httpx.AsyncClient) -> str:
    """The API the server at the client's base URL speaks; raises ServerUnavailable if nothing answers.

    A connection that fails names the server's URL, not the first path asked (Ollama's /api/version, alien to
    a vLLM user): the API is not known yet, only that nothing answered there."""
    base = _base(client)
    try:
        version = await _get_json(client, "/api/version", failure_url=base)
    except ServerUnavailable as error:
        if str(error).endswith(_NOTHING_ANSWERED):
            raise ServerUnavailable(f"{error}; nothing answered there, so no API could be detected") from None
        raise
    if _looks_ollama(version):
        return "ollama"
    if _looks_llamacpp(await _get_json(client, "/props")):
        return "llamacpp"
    models = await _get_json(client, "/v1/models", strict_auth=True)
    if isinstance(models, dict) and isinstance(models.get("data"), list):
        return "openai"
    raise ProtocolError(
        f"{_base(client)}: no known API answered (/api/version, /props, /v1/models); pass --api openai|ollama|llamacpp"
    )


async def describe_configured(client: httpx.AsyncClient, api: str, model: str | None) -> ServerInfo:
    """`describe_server` of the API as configured: "auto" is detected (`detect_api`)."""
    return await describe_server(client, api if api != "auto" else await detect_api(client), model)


async def describe_server(client: httpx.AsyncClient, kind: str, model: str | None) -> ServerInfo:
    """Model (the given one, else the server's first), context length and version, as far as the server tells.

    Every document is read with its types checked (`tui.sources.documents`): a field of the wrong type raises
    ProtocolError ("the server sent 5 as data[0].id where a string was expected").
    """
    base = _base(client)
    max_model_len = None
    version = None
    listed: str | None = None
    model_bytes = n_params = None
    if kind == "ollama":
        version = version_of(await _get_json(client, "/api/version"), base + "/api/version")
        loaded = ollama_first(await _get_json(client, "/api/ps"), base + "/api/ps")
        if loaded:
            listed, max_model_len = loaded.name, loaded.context_length
        if not listed and model is None:
            installed = ollama_first(await _get_json(client, "/api/tags"), base + "/api/tags")
            listed = installed.name if installed else None
    else:
        if kind == "llamacpp":
            props = llamacpp_props(await _get_json(client, "/props"), base + "/props")
            if props:
                listed, max_model_len, version = props.model, props.n_ctx, props.build_info
        else:
            version = version_of(await _get_json(client, "/version"), base + "/version")
        first = listed_model(await _get_json(client, "/v1/models", strict_auth=model is None), base + "/v1/models")
        if first:
            listed = listed if kind == "llamacpp" and listed else first.id
            max_model_len = first.max_model_len or max_model_len
            model_bytes, n_params = first.size_bytes, first.n_params
    chosen = model or listed
    if not chosen:
        if kind == "ollama" and version is None:  # nothing at /api/version: not Ollama at all
            raise ProtocolError(f"{base}: the server did not answer as Ollama (/api/version); try --api auto")
        raise ProtocolError(f"{base}: the server lists no model; pass --model")
    return ServerInfo(
        kind=kind,
        url=base,
        model=chosen,
        max_model_len=max_model_len,
        version=one_line(version, 80) if version else None,
        model_bytes=model_bytes,
        n_params=n_params,
    )


_NOTHING_ANSWERED = ("connection refused", "timed out")
"""How `from_httpx`'s "cannot connect" ends when no server answered at all (a TLS error is an answer)."""


async def _get_json(client: httpx.AsyncClient, path: str, strict_auth: bool = False, failure_url: str | None = None) -> object:
    """The parsed JSON body of a GET, or None when the path is missing or not JSON.

    Unreachable servers raise, naming `failure_url` (default: the path's URL); with `strict_auth`, so does a
    401/403 (the key is wrong, say so).
    """
    try:
        response = await client.get(path)
    except httpx.HTTPError as error:
        raise from_httpx(error, failure_url or _base(client) + path) from None
    if response.is_redirect:  # never followed: it could lead to another host, the API key with it
        raise rejected(response.status_code, _base(client) + path, "", response.headers.get("location"))
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


def _base(client: httpx.AsyncClient) -> str:
    return str(client.base_url).rstrip("/")
