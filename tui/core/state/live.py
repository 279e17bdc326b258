"""The live session the main screen shows, as a plain value: the requests sent from it (their records as
token batches grow them, which have ended, which lane is selected, whose answer the prompt pane shows), judged
by what the server watch (`tui.core.state.server_watch`) knows of its server; and what the panes are given:
the timings, the kept ones as lanes (their gaps judged once, for the timeline and the diagnosis alike), the
selection, the answer text and the diagnosis.

The screen feeds it the facts its workers post and copies what it publishes to the panes; nothing here
knows Textual, so the arithmetic is tested without a terminal."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

from tui.core.measure.chunk_tokens import compact, joined
from tui.core.measure.delivery import burst_reason
from tui.core.measure.gaps import SERVER, worst_gap
from tui.core.measure.records import RequestTiming
from tui.core.state.server_watch import ServerWatch
from tui.core.view.diagnosis import LiveFigures, diagnose
from tui.core.view.lane_figures import NEWEST, after_send, diagnosis_text, moved, selected_index
from tui.core.view.timeline import ALIGNED, KEEP_LANES, VIEWS, Lane, LaneJudge, batches, default_view, keep_count

KEEP_REQUESTS = 40
"""Requests kept; the timeline keeps the last `KEEP_LANES` (32 streams, one batch, stay whole)."""


@dataclass(frozen=True, slots=True)
class LaneTokens:
    """One request's chunks since the last batch, summed up: every offset only where the timeline can show it."""

    request_id: int
    count: int
    """Tokens the chunks of this batch carried."""
    first_offset_s: float
    last_offset_s: float
    offsets_s: tuple[float, ...] | None = None
    """Arrival of each chunk (seconds after the send), for a lane the timeline can show; None for the rest,
    whose exact record comes when the request ends."""
    text: str = ""
    """The batch's text (untrusted), only for the request whose answer the prompt pane shows."""
    client_gaps: tuple[int, ...] = ()
    """Gaps the meter found to be its own so far (a lane the timeline shows; the final record has them all)."""
    tokens_per_chunk: tuple[int, ...] | None = None
    """The tokens each of `offsets_s` carried; None: one each."""

    @classmethod
    def detailed(cls, request_id: int, offsets_s: tuple[float, ...], text: str = "",
                 client_gaps: tuple[int, ...] = (), tokens_per_chunk: tuple[int, ...] | None = None) -> LaneTokens:
        """A lane with every offset."""
        tokens = sum(tokens_per_chunk) if tokens_per_chunk is not None else len(offsets_s)
        return cls(request_id, tokens, offsets_s[0], offsets_s[-1], offsets_s, text, client_gaps, tokens_per_chunk)


@dataclass(frozen=True, slots=True)
class Published:
    """What the panes are given at one publish."""

    timings: list[RequestTiming]
    """The timeline's requests, finished and in flight, oldest first (none sent before the last clear)."""
    kept: list[RequestTiming]
    """Every request kept, a clear of the timeline or not: what the roofline and the traffic view read."""
    selected_back: int
    """The selected lane, counted back from the newest."""
    answer: str | None
    """Answer text that arrived since the last publish; None: nothing to write."""
    answer_final: bool
    """The answer's request has ended: its text is whole."""
    batch_of: list[int]
    """One batch number per timing (`tui.core.view.timeline.batches`: the load dial's lanes each alone)."""
    lanes: list[Lane]
    """The newest timings the timeline keeps (`KEEP_LANES`, the last batch whole) as lanes, their gaps judged
    against every timing (the diagnosis speaks of the same ones); none selected."""


class LiveSession:
    """The requests the main screen sends and shows, judged by what its `server` knows."""

    def __init__(self, server: ServerWatch) -> None:
        self.server = server
        """The server the requests go to: its ceiling and guard judge them, its scrape is beside them."""
        self.selected_back = NEWEST
        self.view = ALIGNED
        """The timeline's view: each key's send sets its default (`default_view`), `v` switches it; the load dial's
        lanes, each arriving alone, leave it be (they would flip it at every arrival, undoing `v`)."""
        self._records: dict[int, RequestTiming] = {}
        self._labels: dict[int, str] = {}
        self._judge = LaneJudge()
        self._lanes: list[Lane] = []
        """The kept timings as lanes, as last published."""
        self._arrived: dict[int, list[float]] = {}
        """Offsets of requests still streaming, as batches bring them (a list each: a tuple grown per batch
        would copy every offset again each time); folded into the records when published."""
        self._client_gaps: dict[int, list[int]] = {}
        """The meter's own gaps among those offsets, as its frames said."""
        self._sizes: dict[int, list[int]] = {}
        """The tokens each of those chunks carried, for a request one of whose chunks carried other than one."""
        self._done: set[int] = set()
        """Requests that ended (completed or failed): the others are in flight."""
        self._over_ceiling: set[int] = set()
        """Requests flagged only for decoding above the ceiling: judged again when the ceiling rises (a server's
        speculation read after its first drafts' requests ended)."""
        self._shown: list[int] = []
        """The request id of each published timing."""
        self._timings: list[RequestTiming] = []
        self._batch_of: list[int] = []
        self._new_send = False
        """A request started since the last publish: the selection goes back to the newest."""
        self._joined = 0
        """Lanes that started since the last publish without taking the selection (the load dial's)."""
        self._alone: set[int] = set()
        """The ids of those lanes: no key's batch, each is one by itself."""
        self._next_id = 1
        self._cleared_below = 0
        """Requests with lower ids were sent before the timeline was last cleared: kept, not drawn."""
        self._ids_lock = threading.Lock()
        """Ids are taken on the screen's thread (sends) and on the load dial's (its requests)."""
        self._answer: list[str] = []
        self._answer_id: int | None = None
        """The request whose answer the prompt pane shows: the newest of the latest send."""
        self._answer_ended = False

    def judge_again(self, ceiling_tok_s: float) -> None:
        """Judge each request flagged only for its rate above the ceiling against this higher one: the flag lifted
        where it allows the rate, else said against it."""
        for request_id in list(self._over_ceiling):
            record = self._records.get(request_id)
            reason = burst_reason(record, ceiling_tok_s) if record is not None else None
            if record is not None:
                self._records[request_id] = replace(record, burst=reason)
            if reason is None:
                self._over_ceiling.discard(request_id)

    # ---- requests ------------------------------------------------------------------------------

    @property
    def next_id(self) -> int:
        """The id the next send's first request gets."""
        return self._next_id

    def __len__(self) -> int:
        """Requests kept."""
        return len(self._records)

    def record(self, request_id: int) -> RequestTiming | None:
        """A kept request's record as it stands (its offsets as of the last publish)."""
        return self._records.get(request_id)

    def send(self, count: int) -> int:
        """Ids for a send of `count` requests (the first returned); the prompt pane shows its last one's answer
        from here on: text of an earlier request still arriving is not it."""
        first_id = self.take_ids(count)
        self._answer_id, self._answer_ended = first_id + count - 1, False
        self._answer.clear()
        return first_id

    def take_ids(self, count: int) -> int:
        """`count` ids no other request has (the first returned), from any thread; the prompt pane's answer stays."""
        with self._ids_lock:
            first_id = self._next_id
            self._next_id += count
        return first_id

    def started(self, request_id: int, label: str, t_sent_unix: float, prompt_tokens: int | None,
                follow: bool = True) -> None:
        """A request sent. `follow`: a send of the user's, whose answer the prompt pane shows and to which the
        selection goes back (the load dial's requests only join the timeline)."""
        self.server.sent_to()
        self._records[request_id] = RequestTiming(ok=True, t_sent_unix=t_sent_unix, prompt_tokens=prompt_tokens)
        self._labels[request_id] = label
        if follow:
            self._answer_id = max(self._answer_id or 0, request_id)  # a send's own id is set ahead, in send()
            self._new_send = True
        else:
            self._joined += 1
            self._alone.add(request_id)

    def on_wire(self, request_id: int, t_sent_unix: float) -> None:
        """A started request's body went on the wire at `t_sent_unix` (its meter's stamp): its send time from now."""
        record = self._records.get(request_id)
        if record is not None:
            self._records[request_id] = replace(record, t_sent_unix=t_sent_unix)

    def tokens(self, lanes: Sequence[LaneTokens]) -> None:
        for lane in lanes:
            if lane.request_id not in self._records:
                continue
            if lane.offsets_s is not None:
                arrived = self._arrived.setdefault(lane.request_id, [])
                sizes = joined(self._sizes.get(lane.request_id), len(arrived), lane.tokens_per_chunk, len(lane.offsets_s))
                if sizes is not None:
                    self._sizes[lane.request_id] = sizes
                arrived.extend(lane.offsets_s)
                if lane.client_gaps:
                    self._client_gaps.setdefault(lane.request_id, []).extend(lane.client_gaps)
                if lane.text and lane.request_id == self._answer_id:
                    self._answer.append(lane.text)
            elif lane.request_id not in self._arrived:
                # A lane the timeline cannot show keeps its first offset only (its TTFT) until its exact record comes.
                self._arrived[lane.request_id] = [lane.first_offset_s]

    def completed(self, request_id: int, timing: RequestTiming) -> None:
        self._arrived.pop(request_id, None)
        self._client_gaps.pop(request_id, None)
        self._sizes.pop(request_id, None)
        self._done.add(request_id)
        if request_id == self._answer_id:
            self._answer_ended = True
        if request_id in self._records:  # not when it was dropped as one too many to keep
            # Clumped arrivals time the delivery, not the generation: flagged, shown as such, kept out of the diagnosis.
            [judged] = self.server.guard.flagged([timing])
            self._records[request_id] = judged
            if judged.burst and burst_reason(timing) is None:
                self._over_ceiling.add(request_id)

    def clear(self) -> None:
        """Clear the timeline: the requests sent so far leave its lanes (and the figures and diagnosis under them),
        nothing else. They stay kept for what reads every request (the roofline's lone prefill, the traffic view's
        matching), and one still streaming goes on to its end there."""
        self._cleared_below = self._next_id
        self._new_send = True

    def toggle_view(self) -> None:
        """`v`: the other view, until the next key's send."""
        self.view = VIEWS[(VIEWS.index(self.view) + 1) % len(VIEWS)]

    def select(self, step: int) -> None:
        """The arrows: +1 one lane older, −1 one newer, kept among the lanes the timeline keeps."""
        self.selected_back = moved(self.selected_back, step, keep_count(self._batch_of, KEEP_LANES))

    def publish(self) -> Published:
        """Fold what arrived into the records, drop the oldest past `KEEP_REQUESTS`, and say what the panes show."""
        ids = sorted(self._records)[-KEEP_REQUESTS:]
        for stale in [i for i in self._records if i not in ids]:
            del self._records[stale], self._labels[stale]
            self._arrived.pop(stale, None)
            self._client_gaps.pop(stale, None)
            self._sizes.pop(stale, None)
            self._done.discard(stale)
            self._over_ceiling.discard(stale)
            self._alone.discard(stale)
        for i, offsets in self._arrived.items():
            if len(offsets) != len(self._records[i].token_offsets_s):
                self._records[i] = replace(self._records[i], token_offsets_s=tuple(offsets),
                                           client_gaps=tuple(self._client_gaps.get(i, ())),
                                           tokens_per_chunk=compact(self._sizes.get(i)))
        kept = [self._records[i] for i in ids]
        ids = [i for i in ids if i >= self._cleared_below]
        self._timings = kept[len(kept) - len(ids):]
        self._shown = ids
        self._batch_of = batches(self._timings, {n for n, i in enumerate(ids) if i in self._alone})
        if self._new_send:  # the send's newest lane: the lanes the load dial started after it come after it
            newest_sent = max((i for i in ids if i not in self._alone), default=None)
            newer = sum(1 for i in ids if newest_sent is not None and i > newest_sent)
            if newest_sent is not None:  # its batch, and what was running when it went, set the view
                self.view = default_view(self._timings, self._batch_of, ids.index(newest_sent))
        else:
            newer = self._joined
        keep = keep_count(self._batch_of, KEEP_LANES)
        self.selected_back = after_send(self.selected_back, self._new_send, keep, newer)
        self._new_send, self._joined = False, 0
        self._lanes = self._judge.lanes(self._timings, [self._labels[i] for i in ids], keep)
        answer = "".join(self._answer) if self._answer or self._answer_ended else None
        published = Published(self._timings, kept, self.selected_back, answer, self._answer_ended, self._batch_of, self._lanes)
        self._answer.clear()
        self._answer_ended = False
        return published

    # ---- what is said of the selection ---------------------------------------------------------

    def diagnosis(self) -> str:
        """The findings of the selected request as last published: "in flight" until it ends; none from a
        request timed in bursts (its figures time the delivery)."""
        index = selected_index(len(self._timings), self.selected_back)
        if index is None:
            return ""
        request_id = self._shown[index]
        name = self._labels.get(request_id, "")
        if request_id not in self._done:
            return diagnosis_text(name, [], in_flight=True)
        return diagnosis_text(name, diagnose(self._figures(self._timings[index], self._stall(index))), in_flight=False)

    def _stall(self, index: int) -> tuple[float, str] | None:
        """The selected stream's worst gap and its cause, where another request's prefill held it (its lane's, as
        the timeline shows it)."""
        lane = index - (len(self._timings) - len(self._lanes))
        worst = worst_gap(self._lanes[lane].gaps) if 0 <= lane < len(self._lanes) else None
        if worst is None or worst.cause != SERVER or not worst.why.startswith("the prefill of"):
            return None
        return worst.length_s, worst.why

    def _figures(self, selected: RequestTiming, stall: tuple[float, str] | None) -> LiveFigures:
        latest = selected if selected.ok and not selected.burst else None
        server = self.server
        snapshot = server.metrics
        return LiveFigures(
            stalled_s=stall[0] if stall else None,
            stalled_by=stall[1] if stall else None,
            ttft_s=latest.ttft_s if latest else None,
            prompt_tokens=latest.prompt_tokens if latest else None,
            context_tokens=(latest.prompt_tokens or 0) + (latest.output_tokens or 0) if latest else None,
            decode_tok_s=latest.decode_tok_s if latest else None,
            decode_ceiling_tok_s=server.decode_ceiling_tok_s,
            waiting=snapshot.waiting if snapshot else None,
            kv_cache_usage=snapshot.kv_cache_usage if snapshot else None,
            prefix_cache_hit_rate=snapshot.prefix_cache_hit_rate if snapshot else None,
            prefix_caching_on=said_on(snapshot.engine_config.get("enable_prefix_caching")) if snapshot else None,
            kv_bytes_per_token=server.kv_bytes_per_token,
            engine=(snapshot.engine if snapshot else None) or (server.served.api if server.served else None),
            on_cpu=bool(server.derived and server.derived.cpu_row),
        )


def said_on(value: str | None) -> bool | None:
    """A config label's boolean ("True"/"False", as vLLM writes them); None when absent or anything else."""
    return {"true": True, "false": False}.get((value or "").lower())
