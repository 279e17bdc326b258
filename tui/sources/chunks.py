"""Reading one decoded chunk of each API: the generated text, and what the server counted.

Pure functions over parsed JSON, so each wire quirk (wire-formats.md) is tested without a socket.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.core.records import ServerSplit
from tui.core.untrusted import one_line

NS_PER_S = 1e9


@dataclass(slots=True)
class Tally:
    """What the server said over the stream besides text: counts, its phase split, an error, the end."""

    prompt_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    split: ServerSplit | None = None
    token_events: int = 0
    """Chunks that each carried one generated token, text or not (vLLM sends an empty text for a token that
    ends inside a UTF-8 sequence); equal to the usage count when the server streams one event per token."""
    error: str | None = None
    done: bool = False
    """True once the stream's own end marker arrived ([DONE], `done: true`, `stop: true`)."""


def read_openai(chunk: dict, tally: Tally) -> str:
    """Text of an OpenAI-compatible chunk (completions or chat); usage, vLLM `metrics`, llama.cpp `timings` into the tally."""
    if "error" in chunk:
        tally.error = _error_text(chunk["error"])
        return ""
    usage = chunk.get("usage")
    if usage:
        _read_usage(usage, tally)
    if timings := chunk.get("timings"):
        tally.split = _llamacpp_split(timings, tally)
    if (metrics := chunk.get("metrics")) and isinstance(metrics, dict):
        tally.split = _vllm_split(metrics, tally)
    choices = chunk.get("choices")
    if not choices:
        return ""
    choice = choices[0]
    if "text" in choice:
        if choice["text"] is not None:
            tally.token_events += 1
        return choice["text"] or ""
    delta = choice.get("delta") or {}
    # Reasoning is generated text too: it is decode work the reader waits through.
    text = delta.get("content") or delta.get("reasoning") or delta.get("reasoning_content") or ""
    if text or ("role" not in delta and any(k in delta for k in ("content", "reasoning", "reasoning_content"))):
        tally.token_events += 1  # the role-only first delta of a chat stream carries no token
    return text


def read_ollama(chunk: dict, tally: Tally) -> str:
    """Text of an Ollama NDJSON object; the final `done` object's counters (ns) become the split."""
    if "error" in chunk:
        tally.error = _error_text(chunk["error"])
        return ""
    message = chunk.get("message")
    if message:
        text = message.get("content") or message.get("thinking") or ""
    else:
        text = chunk.get("response") or chunk.get("thinking") or ""
    if chunk.get("done"):
        tally.done = True
        # Ollama omits zero counters (omitempty): zero means absent.
        prompt_n = chunk.get("prompt_eval_count") or None
        output_n = chunk.get("eval_count") or None
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
    if "content" in chunk and not chunk.get("stop"):
        tally.token_events += 1
    if chunk.get("stop"):
        tally.done = True
        if chunk.get("tokens_evaluated"):
            tally.prompt_tokens = chunk["tokens_evaluated"]
        if chunk.get("tokens_predicted"):
            tally.output_tokens = chunk["tokens_predicted"]
        if timings := chunk.get("timings"):
            tally.split = _llamacpp_split(timings, tally)
    return chunk.get("content") or ""


def _read_usage(usage: dict, tally: Tally) -> None:
    prompt_n = usage.get("prompt_tokens")
    output_n = usage.get("completion_tokens")
    # Ollama's /v1/completions puts zero usage on every chunk; only the last, real one counts.
    if not prompt_n and not output_n:
        return
    tally.prompt_tokens, tally.output_tokens = prompt_n, output_n
    details = usage.get("prompt_tokens_details") or {}
    if details.get("cached_tokens") is not None:
        tally.cached_tokens = details["cached_tokens"]


def _llamacpp_split(timings: dict, tally: Tally) -> ServerSplit:
    prompt_n = timings.get("prompt_n")
    cache_n = timings.get("cache_n")
    if tally.prompt_tokens is None and prompt_n is not None:
        tally.prompt_tokens = prompt_n + (cache_n or 0)
    if tally.output_tokens is None and timings.get("predicted_n") is not None:
        tally.output_tokens = timings["predicted_n"]
    return ServerSplit(
        prefill_s=_ms(timings.get("prompt_ms")),
        decode_s=_ms(timings.get("predicted_ms")),
        prompt_tokens=prompt_n,
        output_tokens=timings.get("predicted_n"),
        cached_tokens=cache_n,
    )


def _vllm_split(metrics: dict, tally: Tally) -> ServerSplit:
    """vLLM's per-request metrics: scheduled → first token is prefill (its first step included), first → last
    token is decode; the wait to be scheduled is `queue_time_ms`, apart."""
    return ServerSplit(
        prefill_s=_ms(metrics.get("time_to_first_token_ms")),
        decode_s=_ms(metrics.get("generation_time_ms")),
        prompt_tokens=tally.prompt_tokens,
        output_tokens=tally.output_tokens,
        cached_tokens=tally.cached_tokens,
        queue_s=_ms(metrics.get("queue_time_ms")),
        prefill_includes_first_step=True,
    )


def _error_text(error: object) -> str:
    if isinstance(error, dict):
        error = error.get("message") or error.get("type") or error
    return one_line(str(error)) or "unspecified error"


def _ns(value: object) -> float | None:
    return value / NS_PER_S if isinstance(value, int | float) and value > 0 else None


def _ms(value: object) -> float | None:
    return value / 1000 if isinstance(value, int | float) and value >= 0 else None
