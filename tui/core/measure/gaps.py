"""Whose is a gap in a token stream: the client's, the server's, or nobody's we can name.

A stream's gaps are the server's steps as the client read them, and two things stretch one: the server (a step
that took longer: another request's prefill in it, a stall of its own) and the client (the meter could not read
in time: another process had the core, or it was busy with other streams). The meter watches its own loop and
records the spans in which it could not read (`Stall`). A chunk read during one (or right after it) may have
waited since the stall began: that is how late its stamp can be. A gap whose two reads may be late by a large
share of the gap itself is the client's: it times the meter, so it is left out of ITL figures (`client_gaps`).
A long gap with a read a little late at its end stays the server's (a 200 ms prefill stall read 5 ms late is a
200 ms stall).

A long gap (a few times its stream's median) that is not the client's is the server's when the server's own
clock says so (its decode time holds the gap) or when every other stream decoding then stopped too: one step
held them all, as a long prompt's prefill does. Otherwise its cause is unknown, and said so.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from statistics import median

from tui.core.measure.records import RequestTiming

READ_SLACK_S = 0.002
"""A read this soon after a stall ended was still working off what piled up during it: its stamp is late too."""
CLIENT_SHARE = 0.25
"""A gap (or a TTFT) whose reads may be this share of it late or more is the client's: its figure times the meter."""
GAP_FACTOR = 3.0
"""A gap this many times its stream's median gap is a stall worth naming ("a few times that lane's median")."""
MIN_GAPS = 4
"""Fewer gaps than this give no median to measure a stall against."""
SHARED_SILENCE = 0.5
"""Another stream counts as stopped with this one when it too read nothing for this share of the gap."""

CLIENT = "client"
SERVER = "server"
UNKNOWN = "unknown"
CAUSES = (SERVER, CLIENT, UNKNOWN)


@dataclass(frozen=True, slots=True)
class Stall:
    """A span in which the meter could not read (its loop ran late, or it was at a core), on the records' clock."""

    start_unix: float
    end_unix: float
    why: str
    """In words: "the meter's loop ran 23 ms late"."""


def read_lateness(times_unix: Sequence[float], stalls: Sequence[Stall]) -> list[float]:
    """For each read (sorted times), how late its stamp may be: from the start of the stall it fell in (or just
    after, within `READ_SLACK_S`) to the read; 0 for a read in no stall. `stalls` are in the order they ended (they
    do not overlap: each starts where the meter last ran)."""
    late = [0.0] * len(times_unix)
    for stall in stalls:
        end = stall.end_unix + READ_SLACK_S
        i = bisect_right(times_unix, stall.start_unix)
        while i < len(times_unix) and times_unix[i] <= end:
            late[i] = max(late[i], times_unix[i] - stall.start_unix)
            i += 1
    return late


def theirs(gap_s: float, start_late_s: float, end_late_s: float) -> bool:
    """Whether a gap is the client's: the lateness its two reads may carry is a large share of it."""
    uncertain = start_late_s + end_late_s
    return uncertain > 0 and uncertain >= CLIENT_SHARE * gap_s


def client_gaps(t_sent_unix: float, offsets_s: Sequence[float], stalls: Sequence[Stall]) -> tuple[int, ...]:
    """Indices i of the gaps (chunk i → i + 1) the client caused (`theirs`)."""
    late = read_lateness([t_sent_unix + offset for offset in offsets_s], stalls)
    return tuple(i for i in range(len(late) - 1) if theirs(offsets_s[i + 1] - offsets_s[i], late[i], late[i + 1]))


def first_read_late(t_sent_unix: float, offsets_s: Sequence[float], stalls: Sequence[Stall]) -> Stall | None:
    """The stall the first chunk was read in (or just after) when it may make a large share of the TTFT the
    client's (`CLIENT_SHARE`); None otherwise."""
    if not offsets_s:
        return None
    first = t_sent_unix + offsets_s[0]
    for stall in stalls:
        if stall.start_unix < first <= stall.end_unix + READ_SLACK_S:
            return stall if first - stall.start_unix >= CLIENT_SHARE * offsets_s[0] else None
    return None


def last_read_late(t_sent_unix: float, offsets_s: Sequence[float], stalls: Sequence[Stall]) -> Stall | None:
    """The stall the last chunk was read in (or just after) when it may make a large share of the decode span (first
    chunk to last) the client's: the decode rate and TPOT then time the meter; None otherwise."""
    if len(offsets_s) < 2:
        return None
    last, span = t_sent_unix + offsets_s[-1], offsets_s[-1] - offsets_s[0]
    for stall in stalls:
        if stall.start_unix < last <= stall.end_unix + READ_SLACK_S:
            return stall if last - stall.start_unix >= CLIENT_SHARE * span else None
    return None


@dataclass(frozen=True, slots=True)
class Gap:
    """One long gap of a stream, and whose it is."""

    index: int
    """The gap from chunk `index` to chunk `index + 1`."""
    start_s: float
    """Its start and end, seconds after the stream's send."""
    end_s: float
    cause: str
    """SERVER, CLIENT or UNKNOWN."""
    why: str
    """In words: "the prefill of long 2000 (2,000 tokens) in the same step"."""

    @property
    def length_s(self) -> float:
        return self.end_s - self.start_s

    def line(self) -> str:
        """"48.2 ms, the server's: the prefill of long 2000 (2,000 tokens)"."""
        whose = "unknown cause" if self.cause == UNKNOWN else f"the {self.cause}'s"
        return f"{self.length_s * 1e3:,.1f} ms, {whose}: {self.why}"


def typical_gap_s(timing: RequestTiming) -> float | None:
    """The stream's median gap between chunks, the client's own left out; None with too few gaps to tell."""
    gaps = timing.chunk_gaps_s
    return median(gaps) if len(gaps) >= MIN_GAPS else None


def attribute(timings: Sequence[RequestTiming], labels: Sequence[str] | None = None,
              last: int | None = None) -> list[tuple[Gap, ...]]:
    """Each stream's long gaps (at least `GAP_FACTOR` times its median), each with its cause, judged against the
    other streams in `timings` (those running at the time: one screen's requests, or one run's); with `last`, only
    the last that many streams' gaps (the others are still judged against)."""
    names = list(labels) if labels is not None and len(labels) == len(timings) else [""] * len(timings)
    spans = [_Span(t, name) for t, name in zip(timings, names, strict=True)]
    judged = spans if last is None else spans[len(spans) - last:]
    return [_long_gaps(span, spans) for span in judged]


class _Span:
    """A stream on the shared clock: its reads (made once: every other stream's gaps are judged against them), its
    send, its prefill."""

    __slots__ = ("timing", "label", "reads")

    def __init__(self, timing: RequestTiming, label: str) -> None:
        self.timing = timing
        self.label = label
        sent = timing.t_sent_unix
        self.reads = [sent + offset for offset in timing.token_offsets_s]

    def decoding_across(self, start: float, end: float) -> bool:
        reads = self.reads
        return bool(reads) and reads[0] <= start and reads[-1] >= end

    def silent_for(self, start: float, end: float) -> float:
        """The longest stretch of [start, end] in which this stream read nothing."""
        reads = self.reads
        edges = [start, *reads[bisect_right(reads, start):bisect_left(reads, end)], end]
        return max(b - a for a, b in pairwise(edges))

    def prefilling(self, start: float, end: float) -> float:
        """How much of [start, end] this stream's prefill (send → first chunk) covered."""
        if not self.reads:
            return 0.0
        return max(0.0, min(self.reads[0], end) - max(self.timing.t_sent_unix, start))


def _long_gaps(span: _Span, spans: Sequence[_Span]) -> tuple[Gap, ...]:
    timing = span.timing
    typical = typical_gap_s(timing)
    if typical is None or typical <= 0:
        return ()
    offsets = timing.token_offsets_s
    client = set(timing.client_gaps)
    found = []
    for i in range(len(offsets) - 1):
        length = offsets[i + 1] - offsets[i]
        if length < GAP_FACTOR * typical:
            continue
        if i in client:
            found.append(Gap(i, offsets[i], offsets[i + 1], CLIENT, "the meter read late (its loop stalled)"))
            continue
        cause, why = _server_cause(span, spans, timing.t_sent_unix + offsets[i], timing.t_sent_unix + offsets[i + 1],
                                   length - typical)
        found.append(Gap(i, offsets[i], offsets[i + 1], cause, why))
    return tuple(found)


def _server_cause(span: _Span, spans: Sequence[_Span], start: float, end: float, excess_s: float) -> tuple[str, str]:
    length = end - start
    decoding = [o for o in spans if o is not span and o.decoding_across(start, end)]
    together = all(o.silent_for(start, end) >= SHARED_SILENCE * length for o in decoding)
    if together:  # every other stream decoding then stopped too (or none was): one step held them
        for other in spans:
            if other is not span and other.prefilling(start, end) >= SHARED_SILENCE * length:
                tokens = f" ({other.timing.prompt_tokens:,} tokens)" if other.timing.prompt_tokens else ""
                return SERVER, f"the prefill of {other.label or 'another request'}{tokens} in the same step"
        if decoding:
            return SERVER, f"every stream decoding then ({len(decoding) + 1}) stopped at once: one step held them all"
    split = span.timing.server_split
    decode_span = span.timing.decode_span_s
    if split is not None and split.decode_s is not None and decode_span is not None:
        if decode_span - split.decode_s < excess_s / 2:  # the server's clock saw the gap: it was in its decode
            return SERVER, "the server's own decode time holds it"
    if decoding:
        return UNKNOWN, "other streams kept reading meanwhile"
    return UNKNOWN, "no other stream ran then, and the server gives no timing of its own"


def count_by_cause(gaps: Sequence[Sequence[Gap]]) -> dict[str, int]:
    """How many long gaps each cause has, over every stream."""
    counts = dict.fromkeys(CAUSES, 0)
    for lane in gaps:
        for gap in lane:
            counts[gap.cause] += 1
    return counts


def counts_line(counts: dict[str, int]) -> str:
    """"5 gaps over 3× their stream's median: 2 the server's, 3 the client's (left out of ITL)"; "" with none."""
    parts = []
    if counts.get(SERVER):
        parts.append(f"{counts[SERVER]} the server's")
    if counts.get(CLIENT):
        parts.append(f"{counts[CLIENT]} the client's (left out of ITL)")
    if counts.get(UNKNOWN):
        parts.append(f"{counts[UNKNOWN]} of unknown cause")
    if not parts:
        return ""
    total = sum(counts.values())
    return f"{total} gap{'s' if total != 1 else ''} over {GAP_FACTOR:g}× their stream's median: " + ", ".join(parts)


def worst_gap(gaps: Sequence[Gap]) -> Gap | None:
    """The longest of a stream's long gaps."""
    return max(gaps, key=lambda gap: gap.length_s, default=None)
