"""Reading one decoded chunk of each API: the generated text, and what the server counted.

Pure functions over parsed JSON, so each wire quirk (wire-formats.md) is tested without a socket. A chunk
whose fields have the wrong type (`choices` a string, `text` a number) raises ProtocolError: that request
fails with one line, the others go on.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.core.measure.records import ServerSplit
from tui.core.untrusted import one_line
from tui.sources.documents import shape_of, shown
from tui.sources.errors import ProtocolError

NS_PER_S = 1e9


@dataclass(slots=True)
class Tally:
    """What the server said over the stream besides text: counts, its phase split, an error, the end."""

    prompt_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    split: ServerSplit | None = None
    tokens_carried: int = 0
    """Tokens the chunks read so far carried, text or not (vLLM sends an empty text for a token that ends inside a
    UTF-8 sequence): the server's per-chunk usage where it sends one (`counted_by_usage`), else the tokens a chunk
    lists (`token_ids`, logprobs' entries: `_tokens_listed`), else one a token event."""
    counted_by_usage: bool = False
    """True once a chunk carrying choices came with usage: the server counts each chunk's tokens itself (vLLM's
    `continuous_usage_stats`), so a chunk of several tokens (`--stream-interval`, speculation) is counted right."""
    completion_id: str | None = None
    """The answer's `id` (OpenAI's completion id), as the server's trace span names the request."""
    error: str | None = None
    done: bool = False
    """True once the stream's own end marker arrived ([DONE], `done: true`, `stop: true`)."""


def read_openai(chunk: dict, tally: Tally) -> str:
    """Text of an OpenAI-compatible chunk (completions or chat); usage, vLLM `metrics`, llama.cpp `timings` into the tally.

    Raises ProtocolError ("malformed chunk: …") for a field of the wrong type. This runs once a token per
    stream, so the walk through `choices` is not checked step by step: a wrong shape there raises
    TypeError/AttributeError/KeyError, turned into the message by `_misshapen` (an isinstance a step cost
    a quarter more per chat chunk); only the text, which no step would trip on, is checked.
    """
    if "error" in chunk:
        tally.error = _error_text(chunk["error"])
        return ""
    if tally.completion_id is None and isinstance(completion_id := chunk.get("id"), str):
        tally.completion_id = one_line(completion_id)
    usage = chunk.get("usage")
    counted = bool(usage) and _read_usage(usage, tally)
    if timings := chunk.get("timings"):
        tally.split = _llamacpp_split(timings, tally)
    if (metrics := chunk.get("metrics")) and isinstance(metrics, dict):
        tally.split = _vllm_split(metrics, tally)
    choices = chunk.get("choices")
    if not choices:
        return ""
    if counted:  # the server's own count of the tokens so far, this chunk's included
        tally.counted_by_usage = True
        tally.tokens_carried = tally.output_tokens or 0
    try:
        choice = choices[0]
        if "text" in choice:
            text = choice["text"]
            if text is None:
                return ""
            if not isinstance(text, str):
                raise malformed("choices[0].text", text, "a string")
            if not counted:
                listed = _tokens_listed(choice)
                tally.tokens_carried += 1 if listed is None else listed
            return text
        delta = choice.get("delta")
        if not delta:
            return ""
        # Reasoning is generated text too: it is decode work the reader waits through.
        text = delta.get("content") or delta.get("reasoning") or delta.get("reasoning_content") or ""
    except (TypeError, AttributeError, KeyError):
        raise _misshapen(choices) from None
    if not isinstance(text, str):
        raise malformed(f"choices[0].delta.{_first_set(delta, TEXT_KEYS)}", text, "a string")
    if not counted:
        listed = _tokens_listed(choice)
        if listed is not None:
            tally.tokens_carried += listed
        elif text or ("role" not in delta and any(k in delta for k in TEXT_KEYS)):
            tally.tokens_carried += 1  # the role-only first delta of a chat stream carries no token
    return text


def _tokens_listed(choice: dict) -> int | None:
    """The tokens a choice lists one by one, where it does: vLLM's `token_ids` (`return_token_ids`), else an entry a
    token in its logprobs (`tokens` in completions', `content` in chat's); None where it lists none."""
    token_ids = choice.get("token_ids")
    if isinstance(token_ids, list):
        return len(token_ids)
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, dict):
        entries = logprobs.get("tokens", logprobs.get("content"))
        if isinstance(entries, list):
            return len(entries)
    return None


def read_ollama(chunk: dict, tally: Tally) -> str:
    """Text of an Ollama NDJSON object; the final `done` object's counters (ns) become the split."""
    if "error" in chunk:
        tally.error = _error_text(chunk["error"])
        return ""
    message = chunk.get("message")
    if message:
        try:
            text = message.get("content") or message.get("thinking") or ""
        except AttributeError:  # not an object: unchecked on the way, as in read_openai
            raise malformed("message", message, "an object") from None
        if not isinstance(text, str):
            raise malformed(f"message.{_first_set(message, ('content', 'thinking'))}", text, "a string")
    else:
        text = chunk.get("response") or chunk.get("thinking") or ""
        if not isinstance(text, str):
            raise malformed(_first_set(chunk, ("response", "thinking")), text, "a string")
    if not chunk.get("done"):
        tally.tokens_carried += 1  # an object a token, text or not; the last (`done`) carries the counters
        return text
    tally.done = True
    # Ollama omits zero counters (omitempty): zero means absent.
    prompt_n = _count(chunk.get("prompt_eval_count"), "prompt_eval_count") or None
    output_n = _count(chunk.get("eval_count"), "eval_count") or None
    tally.prompt_tokens, tally.output_tokens = prompt_n, output_n
    tally.split = ServerSplit(
        prefill_s=_ns(chunk.get("prompt_eval_duration")),
        decode_s=_ns(chunk.get("eval_duration")),
        prompt_tokens=prompt_n,
        output_tokens=output_n,
        load_s=_ns(chunk.get("load_duration")),
        decode_spans_first_token=True,
    )
    return text


def read_llamacpp(chunk: dict, tally: Tally) -> str:
    """Text of a llama.cpp native `/completion` event; the last (`stop: true`) carries `timings`."""
    if "error" in chunk:
        tally.error = _error_text(chunk["error"])
        return ""
    text = chunk.get("content") or ""
    if not isinstance(text, str):
        raise malformed("content", text, "a string")
    if not chunk.get("stop"):
        if "content" in chunk:
            tally.tokens_carried += 1
        return text
    tally.done = True
    if prompt_n := _count(chunk.get("tokens_evaluated"), "tokens_evaluated"):
        tally.prompt_tokens = prompt_n
    if output_n := _count(chunk.get("tokens_predicted"), "tokens_predicted"):
        tally.output_tokens = output_n
    if timings := chunk.get("timings"):
        tally.split = _llamacpp_split(timings, tally)
    return text


TEXT_KEYS = ("content", "reasoning", "reasoning_content")
"""Delta fields that carry generated text, in the order they are read."""


def malformed(field: str, value: object, expected: str) -> ProtocolError:
    """"malformed chunk: choices is a string ('oops') where a list was expected"."""
    return ProtocolError(f"malformed chunk: {field} is {shape_of(value)} ({shown(value)}) where {expected} was expected")


def _misshapen(choices: object) -> ProtocolError:
    """The field of a truthy `choices` that `read_openai` could not walk through: the list, its first entry,
    or that entry's delta (the only step left that can fail when the first two are right)."""
    if not isinstance(choices, list):
        return malformed("choices", choices, "a list")
    if not isinstance(choices[0], dict):
        return malformed("choices[0]", choices[0], "an object")
    return malformed("choices[0].delta", choices[0].get("delta"), "an object")


def _first_set(document: dict, keys: tuple[str, ...]) -> str:
    """The first of `keys` with a truthy value: the field a text was read from (for a message)."""
    return next((key for key in keys if document.get(key)), keys[0])


def _count(value: object, field: str) -> int | None:
    """A token count the server sent: None when absent, else a whole number of 0 or more."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    raise malformed(field, value, "a count (a whole number, 0 or more)")


def _read_usage(usage: object, tally: Tally) -> bool:
    """Into the tally; False for a usage that counts nothing (and is left out)."""
    if not isinstance(usage, dict):
        raise malformed("usage", usage, "an object")
    prompt_n = _count(usage.get("prompt_tokens"), "usage.prompt_tokens")
    output_n = _count(usage.get("completion_tokens"), "usage.completion_tokens")
    # Ollama's /v1/completions puts zero usage on every chunk; only the last, real one counts.
    if not prompt_n and not output_n:
        return False
    tally.prompt_tokens, tally.output_tokens = prompt_n, output_n
    details = usage.get("prompt_tokens_details")
    if not details:
        return True
    if not isinstance(details, dict):
        raise malformed("usage.prompt_tokens_details", details, "an object")
    cached_n = _count(details.get("cached_tokens"), "usage.prompt_tokens_details.cached_tokens")
    if cached_n is not None:
        tally.cached_tokens = cached_n
    return True


def _llamacpp_split(timings: object, tally: Tally) -> ServerSplit:
    if not isinstance(timings, dict):
        raise malformed("timings", timings, "an object")
    prompt_n = _count(timings.get("prompt_n"), "timings.prompt_n")
    cache_n = _count(timings.get("cache_n"), "timings.cache_n")
    predicted_n = _count(timings.get("predicted_n"), "timings.predicted_n")
    if tally.prompt_tokens is None and prompt_n is not None:
        tally.prompt_tokens = prompt_n + (cache_n or 0)
    if tally.output_tokens is None and predicted_n is not None:
        tally.output_tokens = predicted_n
    return ServerSplit(
        prefill_s=_ms(timings.get("prompt_ms")),
        decode_s=_ms(timings.get("predicted_ms")),
        prompt_tokens=prompt_n,
        output_tokens=predicted_n,
        cached_tokens=cache_n,
    )


def _vllm_split(metrics: dict, tally: Tally) -> ServerSplit:
    """vLLM's per-request metrics: scheduled → first token is prefill (its first step included), first → last
    token is decode; the wait to be scheduled is `queue_time_ms`, apart. Behind a disaggregated front, the KV's
    move to the decode worker is inside the prefill: `kv_transfer_time_ms` and `kv_transfer_bytes`."""
    transfer_bytes = _count(metrics.get("kv_transfer_bytes"), "metrics.kv_transfer_bytes")
    return ServerSplit(
        prefill_s=_ms(metrics.get("time_to_first_token_ms")),
        decode_s=_ms(metrics.get("generation_time_ms")),
        prompt_tokens=tally.prompt_tokens,
        output_tokens=tally.output_tokens,
        cached_tokens=tally.cached_tokens,
        queue_s=_ms(metrics.get("queue_time_ms")),
        prefill_includes_first_step=True,
        kv_transfer_s=_ms(metrics.get("kv_transfer_time_ms")),
        kv_transfer_bytes=transfer_bytes,
    )


def _error_text(error: object) -> str:
    if isinstance(error, dict):
        error = error.get("message") or error.get("type") or error
    return one_line(str(error)) or "unspecified error"


def _ns(value: object) -> float | None:
    return value / NS_PER_S if isinstance(value, int | float) and value > 0 else None


def _ms(value: object) -> float | None:
    return value / 1000 if isinstance(value, int | float) and value >= 0 else None
