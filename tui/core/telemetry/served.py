"""Every request a server served, as its own trace span told it: the phase record, its cold start, a bounded window.

A served request is the server's account of one request (vLLM's `llm_request` span, or the simulator's): when it
arrived, how long it queued, prefilled and decoded, and its token counts. phasetop's own sends are found among
them by the completion id the client read from the stream (`match_sent`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tui.core.measure.stats import summarize


@dataclass(frozen=True, slots=True)
class ServedRequest:
    """One finished request as the server timed it (seconds; `start_unix` is its arrival on the wall clock)."""

    request_id: str | None
    """The server's id for it (vLLM: the completion's id and a `-N` choice suffix); untrusted text."""
    start_unix: float
    end_unix: float
    queue_s: float
    """Waiting to be scheduled (vLLM: from the engine queueing it to its first schedule)."""
    prefill_s: float
    """Scheduled → first token: the prompt's prefill, the step that sampled the first token included."""
    decode_s: float
    """First token → last token."""
    ttft_s: float
    """Arrival → first token, as the server counts it."""
    e2e_s: float
    """Arrival → finish. On vLLM it also holds the API server's own time, so the three phases add up to less."""
    prompt_tokens: int
    completion_tokens: int
    service: str | None = None
    """The sender's `service.name` resource attribute; untrusted text."""
    host: str | None = None
    """The sender's `host.name` resource attribute; untrusted text."""
    kv_transfer_s: float | None = None
    """A disaggregated server's KV move from its prefill worker to its decode worker, inside `prefill_s`."""
    sent_by_phasetop: bool = False
    """One of phasetop's own requests (`match_sent`)."""
    received_unix: float | None = None
    """When phasetop's receiver took its span in, on phasetop's own clock: the window ages by this, never by the
    sender's clock. None for a record not received (built by hand)."""

    @property
    def unaccounted_s(self) -> float:
        """What `e2e_s` holds outside queue, prefill and decode (vLLM's API server: tokenizing, detokenizing)."""
        return self.e2e_s - (self.queue_s + self.prefill_s + self.decode_s)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "unaccounted_s": self.unaccounted_s}


@dataclass(frozen=True, slots=True)
class ServerSpan:
    """A span that is no request: vLLM's start-up (`Executor init`, `Load model`, …), the server's cold start."""

    name: str
    start_unix: float
    end_unix: float
    service: str | None = None
    host: str | None = None

    @property
    def duration_s(self) -> float:
        return self.end_unix - self.start_unix

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "duration_s": self.duration_s}


def match_sent(records: Iterable[ServedRequest], sent_ids: Collection[str]) -> list[ServedRequest]:
    """The records, each marked `sent_by_phasetop` when its id is one of `sent_ids` (completion ids phasetop's
    client read), as is or with vLLM's choice suffix (`cmpl-ab12-0` for the completion `cmpl-ab12`)."""
    return [replace(r, sent_by_phasetop=r.sent_by_phasetop or is_sent(r.request_id, sent_ids)) for r in records]


def is_sent(request_id: str | None, sent_ids: Collection[str]) -> bool:
    return sent_id(request_id, sent_ids) is not None


def sent_id(request_id: str | None, sent_ids: Collection[str]) -> str | None:
    """The completion id among `sent_ids` that a span's request id names: itself, or it less vLLM's `-N` choice."""
    if not request_id:
        return None
    if request_id in sent_ids:
        return request_id
    stem, dash, choice = request_id.rpartition("-")
    return stem if dash and choice.isdigit() and stem in sent_ids else None


@dataclass
class Tally:
    """What a receiver took in and what it could not keep, for the honest footnote under every figure."""

    posts: int = 0
    """Export requests read whole and decoded."""
    refused_posts: int = 0
    """Export requests answered with an error: not protobuf, too large, cut off, not decodable."""
    spans: int = 0
    """Spans decoded, of every name."""
    rejected_spans: int = 0
    """`llm_request` spans that could not be read as a request (an attribute missing or wrong): told to the
    sender as OTLP's partial success."""
    spans_with_dropped_attributes: int = 0
    """Spans whose sender cut attributes (`dropped_attributes_count`, its own limits): the rest may be incomplete."""
    dropped_events: int = 0
    """Span events the sender dropped (`dropped_events_count`)."""
    evicted: int = 0
    """Records pushed out of the window (the oldest, past its count or its age) before anyone read them all."""
    refused_spans: dict[str, int] = field(default_factory=dict)
    """Request spans refused for times no request could have (`implausible`), by reason: kept out, so one broken
    clock cannot push real requests out of the window."""

    def refuse(self, reasons: Iterable[str]) -> None:
        for reason in reasons:
            self.refused_spans[reason] = self.refused_spans.get(reason, 0) + 1

    def copy(self) -> Tally:
        """A copy that shares nothing (the counts by reason too): safe to hand to another thread."""
        return replace(self, refused_spans=dict(self.refused_spans))

    def to_json(self) -> dict[str, Any]:
        """The counters (the refused spans by reason are `refused_json`'s)."""
        counts = asdict(self)
        del counts["refused_spans"]
        return counts


MAX_CLOCK_AHEAD_S = 300.0
"""How far after phasetop received it a span may end: clocks that NTP keeps disagree by far less than this."""
MAX_REQUEST_S = 86_400.0
"""No request lasts a day: a span or phase longer than this is a broken clock or a broken sender."""
EARLIEST_UNIX = 1_577_836_800.0
"""2020-01-01: a span stamped before it comes from a clock never set (1970, an unset RTC's 2000). Spans from the past
after it are taken (a replay, a Collector's retry): aged by their receipt, they push nothing out."""
REFUSALS = {
    "future": "stamped in the future (its sender's clock runs ahead)",
    "before_2020": "stamped before 2020 (its sender's clock was never set)",
    "too_long": "lasting over a day (no request does)",
}
"""Why a request span was refused (`implausible`), by the key `phasetop traces --json` counts it under."""


def implausible(record: ServedRequest, received_unix: float) -> str | None:
    """The `REFUSALS` key a span's times break, or None when a request could have had them."""
    if record.end_unix > received_unix + MAX_CLOCK_AHEAD_S:
        return "future"
    if record.start_unix < EARLIEST_UNIX:
        return "before_2020"
    durations = (record.end_unix - record.start_unix, record.queue_s, record.prefill_s, record.decode_s,
                 record.ttft_s, record.e2e_s)
    return "too_long" if max(durations) > MAX_REQUEST_S else None


def screened(records: Iterable[ServedRequest], received_unix: float) -> tuple[list[ServedRequest], list[str]]:
    """The records a request could have been, stamped with their receipt, and the refusal key of each of the rest."""
    kept, refused = [], []
    for record in records:
        reason = implausible(record, received_unix)
        if reason is None:
            kept.append(replace(record, received_unix=received_unix))
        else:
            refused.append(reason)
    return kept, refused


def refused_json(tally: Tally) -> dict[str, Any]:
    """`phasetop traces --json`'s `refused`: how many request spans were refused, and how many for each reason."""
    return {"spans": sum(tally.refused_spans.values()),
            "by_reason": {reason: tally.refused_spans.get(reason, 0) for reason in REFUSALS}}


def refused_line(tally: Tally) -> str | None:
    """The refused request spans in words ("refused as implausible, kept out of the window: 2 request spans stamped in
    the future (…)"), each reason with its count where there are several; None if none."""
    if not tally.refused_spans:
        return None
    total = sum(tally.refused_spans.values())
    spans = f"{total:,} request span{'s' * (total != 1)}"
    if len(tally.refused_spans) == 1:
        [reason] = tally.refused_spans
        why = f"{spans} {REFUSALS[reason]}"
    else:
        why = f"{spans}: " + "; ".join(f"{count:,} {REFUSALS[reason]}" for reason, count in tally.refused_spans.items())
    return f"refused as implausible, kept out of the window: {why}"


def not_counted(tally: Tally, last_refusal: str | None = None) -> list[str]:
    """What the window does not hold, each in words: spans unreadable or cut, exports refused, records pushed out."""
    lost = []
    if tally.rejected_spans:
        lost.append(f"{tally.rejected_spans:,} request spans rejected as unreadable")
    if tally.refused_posts:
        last = f" (last: {last_refusal})" if last_refusal else ""
        lost.append(f"{tally.refused_posts:,} exports refused{last}")
    if tally.spans_with_dropped_attributes:
        lost.append(f"{tally.spans_with_dropped_attributes:,} spans cut by their sender's attribute limit")
    if tally.evicted:
        lost.append(f"{tally.evicted:,} older requests pushed out of the window")
    return lost


MAX_RECORDS = 10_000
"""The window's most requests: a sender that floods cannot grow phasetop's memory past about this many records."""
MAX_AGE_S = 600.0
"""The window's longest memory: seconds before the newest receipt (phasetop's clock, not the sender's)."""
MAX_SERVER_SPANS = 200


@dataclass
class TraceWindow:
    """The served requests received in the last `max_age_s` seconds (at most `max_records`), the start-up spans, and
    what came in: a ring, so memory stays bounded whatever a sender does; what it pushed out is counted."""

    max_records: int = MAX_RECORDS
    max_age_s: float = MAX_AGE_S
    records: deque[ServedRequest] = field(default_factory=deque)
    server_spans: deque[ServerSpan] = field(default_factory=lambda: deque(maxlen=MAX_SERVER_SPANS))
    tally: Tally = field(default_factory=Tally)
    newest_received_unix: float | None = None
    """The latest receipt among every record taken in: the age limit counts back from it."""

    def add(self, records: Iterable[ServedRequest], server_spans: Iterable[ServerSpan] = ()) -> None:
        """Keep these, then drop the oldest kept past the count, and those received over `max_age_s` before the
        newest. The ring is in the order they were received, so the oldest receipt is always at its left; a
        record with no receipt (built by hand, not received) is pushed out by the count alone."""
        kept = self.records
        for record in records:
            if record.received_unix is not None and (self.newest_received_unix is None
                                                      or record.received_unix > self.newest_received_unix):
                self.newest_received_unix = record.received_unix
            kept.append(record)
        self.server_spans.extend(server_spans)
        while len(kept) > self.max_records:
            kept.popleft()
            self.tally.evicted += 1
        if self.newest_received_unix is not None:
            horizon = self.newest_received_unix - self.max_age_s
            while kept and kept[0].received_unix is not None and kept[0].received_unix < horizon:
                kept.popleft()
                self.tally.evicted += 1


PHASES = ("queue_s", "prefill_s", "decode_s", "ttft_s", "e2e_s", "unaccounted_s")
"""Each record's figures that percentiles are taken of: exact per request, not histogram buckets."""


def senders(records: Iterable[ServedRequest]) -> list[str]:
    """Who sent the spans, `service@host` as their resource says (already one safe line each), sorted."""
    return sorted({f"{r.service or '?'}@{r.host or '?'}" for r in records})


def served_summary(records: Collection[ServedRequest]) -> dict[str, Any]:
    """Mean/p50/p90/p99/n of each phase over the records, their token totals and who sent them."""
    return {
        "requests": len(records),
        "sent_by_phasetop": sum(1 for r in records if r.sent_by_phasetop),
        "senders": senders(records),
        "prompt_tokens": sum(r.prompt_tokens for r in records),
        "completion_tokens": sum(r.completion_tokens for r in records),
        **{name: summarize(getattr(r, name) for r in records).to_json() for name in PHASES},
    }
