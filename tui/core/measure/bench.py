"""The figures of a load run, computed as `vllm bench serve` 0.33 computes them (`calculate_metrics`).

- A request counts as completed when it ended well and carried at least one token; failed ones are
  counted, never measured.
- TTFT: first chunk carrying a token after the send. E2EL: the last. ITL: every token's gap of every completed
  request, pooled; where vLLM pools every chunk's gap, which differs where a chunk carries several tokens (a stream
  interval, a speculative step): that figure is `chunk_gaps_s` here. TPOT: (E2EL − TTFT) / (output tokens − 1),
  only over requests with more than one output token.
- Two points where SPEC is stricter than vLLM's client (`benchmarks/lib/endpoint_request_func.py`):
  the clock starts when the request body is on the wire, not before the POST is built (vLLM's TTFT
  holds its own client's send path too), and a chunk without text (a role-only chat chunk) is not a
  token (vLLM's client takes any chunk with `choices` as one). Both come from `stream.measure`.
- Token counts are the server's usage (prompt and completion tokens), else the client's estimate.
- Throughputs divide by the run's duration, which starts when the arrival schedule starts (the first
  request is sent one gap later) and ends when the last request has finished, as vLLM's
  `benchmark_duration` does.
- Goodput: completed requests whose TTFT and TPOT are both within the SLOs given, per second of
  duration; a request with one output token has TPOT 0 for this test, as in vLLM.
- Percentiles interpolate linearly (numpy's default), via `stats.summarize`.
Throughputs keep the names of vLLM's result JSON (request_throughput in req/s, output_throughput and
total_token_throughput in tok/s, request_goodput in req/s); the summaries are in seconds, as in probe's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tui.core.measure.records import RequestTiming
from tui.core.measure.stats import summarize, summarize_with_max


def completed(requests: Sequence[RequestTiming]) -> list[RequestTiming]:
    """The requests that ended well with at least one token: the ones vLLM measures."""
    return [r for r in requests if r.ok and r.ttft_s is not None]


def bench_figures(
    requests: Sequence[RequestTiming],
    duration_s: float,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
) -> dict[str, Any]:
    """`vllm bench serve`'s figures over a run: counts, throughputs, goodput, and TTFT/TPOT/ITL/E2EL summaries in seconds."""
    done = completed(requests)
    total_input = sum(r.prompt_tokens or 0 for r in done)
    total_output = sum(r.output_tokens or 0 for r in done)
    per_s = (lambda count: count / duration_s) if duration_s > 0 else (lambda count: None)
    goodput = None
    if slo_ttft_s is not None or slo_tpot_s is not None:
        goodput = per_s(sum(1 for r in done if _within(r, slo_ttft_s, slo_tpot_s)))
    return {
        "completed": len(done),
        "failed": len(requests) - len(done),
        "duration_s": duration_s,
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "tokens_estimated": any(r.tokens_estimated for r in done),
        "request_throughput": per_s(len(done)),
        "request_goodput": goodput,
        "output_throughput": per_s(total_output),
        "total_token_throughput": per_s(total_input + total_output),
        "ttft_s": summarize(r.ttft_s for r in done).to_json(),
        "tpot_s": summarize(r.tpot_s for r in done).to_json(),
        "itl_s": summarize_with_max(gap for r in done for gap in r.itl_s),
        "chunk_gaps_s": summarize_with_max(gap for r in done for gap in r.chunk_gaps_s),
        "e2el_s": summarize(r.e2e_s for r in done).to_json(),
        "peak_concurrent_requests": peak_concurrency(done),
    }


def _within(request: RequestTiming, slo_ttft_s: float | None, slo_tpot_s: float | None) -> bool:
    if slo_ttft_s is not None and (request.ttft_s is None or request.ttft_s > slo_ttft_s):
        return False
    return slo_tpot_s is None or (request.tpot_s or 0.0) <= slo_tpot_s


def peak_concurrency(requests: Sequence[RequestTiming]) -> int:
    """Most requests in flight at once, send to last token, as half-open intervals (vLLM's sweep line)."""
    events = sorted(
        [(r.t_sent_unix, 1) for r in requests if r.e2e_s is not None]
        + [(r.t_sent_unix + r.e2e_s, -1) for r in requests if r.e2e_s is not None]
    )
    current = peak = 0
    for _, delta in events:
        current += delta
        peak = max(peak, current)
    return peak
