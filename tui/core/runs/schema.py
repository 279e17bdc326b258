"""The run file's schema as pydantic models: what `tui.core.runs.run_record` reads of a run, checked before it reads it.

A run file is anyone's JSON (hand edited, another version's, a bench `--save` document, a torn copy), and
`runs`, `compare` and the UI's runs view read many at once: one odd file must not stop the others. So a
file is checked here and, when it cannot be read, named with one reason ("requests[0] is an int where an
object was expected") and skipped. Lenient where the contract allows it: every field but `schema` and `id`
may be absent or null, and unknown fields are kept. Strict on the types the core relies on: objects where
it calls `.get`, lists where it iterates, figures (finite numbers within `MAX_FIGURE`) where it computes
percentiles, so a string is never coerced into a number nor a 1e308 into an overflow.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError

SCHEMA = 1

MAX_FIGURE = 1e15
"""Largest magnitude of a figure (seconds, tok/s): far beyond any measurement, and a million of them still
sum without overflow."""
MAX_DEPTH = 64
"""Deepest nesting read: phasetop writes 4 levels; a deeper document would only exhaust the recursion of
whatever walks it."""
NOT_A_NUMBER = ("inf", "-inf", "nan")
"""How the run writer spells a figure JSON cannot hold; read as "no figure"."""


class RunInvalid(ValueError):
    """The document is not a readable run; the message is the one reason, for a person."""


def check_run(document: object) -> None:
    """Raise `RunInvalid` with one reason when `document` (parsed JSON) is not a run the core can read."""
    depth = _depth(document)
    if depth > MAX_DEPTH:
        raise RunInvalid(f"nested {depth} levels deep (at most {MAX_DEPTH} are read)")
    if not isinstance(document, dict):
        raise RunInvalid(f"the file holds {shape_of(document)} where a run (an object) was expected")
    if document.get("schema") != SCHEMA or isinstance(document.get("schema"), bool):
        raise RunInvalid(f"not a phasetop run file (schema {SCHEMA}): schema is {_shown(document.get('schema'))}")
    try:
        RunFile.model_validate(document)
    except ValidationError as error:
        raise RunInvalid(reason_of(error)) from None


def shape_of(value: object) -> str:
    """What a JSON value is, in words: "an int", "a string", "null"…"""
    if value is None:
        return "null"
    for kind, words in ((bool, "a boolean"), (int, "an int"), (float, "a number"), (str, "a string"),
                        (list, "a list"), (dict, "an object")):
        if isinstance(value, kind):
            return words
    return f"a {type(value).__name__}"


def reason_of(error: ValidationError) -> str:
    """The first of pydantic's errors in the run file's words: "requests[0].itl_s is an int where a list was expected"."""
    first = error.errors(include_url=False)[0]
    where = _where(first["loc"])
    kind = first["type"]
    if kind == "missing":
        return f"{where} is missing"
    if kind in _EXPECTED:
        return f"{where} is {shape_of(first['input'])} where {_EXPECTED[kind]} was expected"
    if kind in _OURS:
        return f"{where} {first['msg']}"
    return f"{where}: {first['msg']}"


def _figure(value: object) -> object:
    """A figure: a finite number within MAX_FIGURE, null, or the writer's "inf"/"nan" (read as no figure)."""
    if value is None or value in NOT_A_NUMBER:
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("figure", "is {shape} where a number was expected", {"shape": shape_of(value)})
    if not math.isfinite(value) or abs(value) > MAX_FIGURE:
        raise PydanticCustomError("figure_range", "is {value} where a finite figure (at most {limit} in magnitude) was expected",
                                  {"value": _shown(value), "limit": f"{MAX_FIGURE:g}"})
    return value


def _burst(value: object) -> object:
    """Why a request's timing is delivery: a reason (text), a flag, or null."""
    if value is None or isinstance(value, str | bool):
        return value
    raise PydanticCustomError("burst", "is {shape} where a reason (a string) was expected", {"shape": shape_of(value)})


Figure = Annotated[Any, BeforeValidator(_figure)]
Burst = Annotated[Any, BeforeValidator(_burst)]


class _Part(BaseModel):
    """A part of a run file: unknown fields kept, no coercion ("5" is not 5)."""

    model_config = ConfigDict(extra="allow", strict=True)


class RequestRecord(_Part):
    """One request of a run: the figures summarised and compared, and whether to count it."""

    ok: bool | None = None
    burst: Burst = None
    ttft_s: Figure = None
    tpot_s: Figure = None
    e2e_s: Figure = None
    decode_tok_s: Figure = None
    prefill_tok_s: Figure = None
    itl_s: list[Figure] | None = None


class ServerRecord(_Part):
    """The server a run measured: identity (any scalar, shown as text) and the config dicts diffed key by key."""

    simulator_flags: dict[str, Any] | None = None
    engine_config: dict[str, Any] | None = None
    command_flags: dict[str, Any] | None = None


class SentEntry(_Part):
    """One label a UI session sent (`tui.core.runs.sent`): how many times, and the sizes of one send."""

    sends: int | None = None
    concurrency: int | None = None
    prompt_tokens: int | None = None
    max_tokens: int | None = None


class ParamsRecord(_Part):
    """The workload's flags (any scalars, diffed as text), and a UI session's sends, counted by label."""

    sent: dict[str, SentEntry] | None = None


class RequestsSample(_Part):
    """When `requests` are a sample: how many were kept of how many."""


class ResultRecord(_Part):
    """The run's own figures; the bench throughputs and UI bandwidths compared are figures."""

    finding: str | None = None
    request_throughput: Figure = None
    output_throughput: Figure = None
    total_token_throughput: Figure = None
    request_goodput: Figure = None
    gpu_bw_gbs: Figure = None
    gpu_mem_busy: Figure = None
    bw_share_of_ceiling: Figure = None


class RunFile(_Part):
    """A saved run (`tui.core.runs.run_record.new_run`'s shape)."""

    id: Annotated[str, BeforeValidator(lambda value: _id(value))]
    kind: str | None = None
    started: str | None = None
    finished: str | None = None
    params: ParamsRecord | None = None
    server: ServerRecord | None = None
    requests: list[RequestRecord] | None = None
    result: ResultRecord | None = None
    requests_sample: RequestsSample | None = None


def _id(value: object) -> object:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, str):
        raise PydanticCustomError("run_id", "is empty where a run id was expected")
    raise PydanticCustomError("run_id", "is {shape} where a run id (a string) was expected", {"shape": shape_of(value)})


_EXPECTED = {
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "a list",
    "string_type": "a string",
    "bool_type": "true or false",
    "int_type": "an int",
    "float_type": "a number",
}
"""pydantic's error types, as what was expected."""
_OURS = ("figure", "figure_range", "burst", "run_id")
"""Error types raised here, whose message already reads on from the field's name."""


def _where(loc: tuple[str | int, ...]) -> str:
    """("requests", 0, "ttft_s") as "requests[0].ttft_s"."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "the run"


def _shown(value: object) -> str:
    text = repr(value) if isinstance(value, str) else ("null" if value is None else str(value))
    return text if len(text) <= 40 else text[:40] + "…"


def _depth(value: object) -> int:
    """How deeply lists and objects nest in `value`, walked without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if depth <= MAX_DEPTH:
                stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest
