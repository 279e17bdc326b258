"""Whose is a gap: the meter's stalls make it the client's; a shared silence or the server's clock the server's."""

from __future__ import annotations

from tui.core.measure.gaps import (CLIENT, READ_SLACK_S, SERVER, UNKNOWN, Stall, attribute, client_gaps, count_by_cause, counts_line,
                           first_read_late, last_read_late, read_lateness, worst_gap)
from tui.core.measure.records import RequestTiming, ServerSplit

T0 = 1_800_000_000.0
ITL = 0.01


def steady(n: int, start: float = 0.05, silence: tuple[float, float] | None = None, sent: float = T0) -> RequestTiming:
    """A stream of `n` chunks 10 ms apart from `start`; none between the absolute times of `silence`."""
    offsets, t = [], start
    while len(offsets) < n:
        if silence is None or not (silence[0] < sent + t < silence[1]):
            offsets.append(t)
        t += ITL
    return RequestTiming(ok=True, t_sent_unix=sent, token_offsets_s=tuple(offsets), prompt_tokens=200, output_tokens=n)


def test_reads_in_a_stall_or_just_after_it_may_be_late_by_as_long_as_since_it_began():
    stall = Stall(T0 + 1.0, T0 + 1.05, "the meter's loop ran 50 ms late")
    times = [T0 + 0.99, T0 + 1.02, T0 + 1.05 + READ_SLACK_S / 2, T0 + 1.05 + 3 * READ_SLACK_S, T0 + 1.07]
    late = read_lateness(times, [stall])
    assert [round(x, 4) for x in late] == [0.0, 0.02, 0.051, 0.0, 0.0]
    # into the stall, within it, out of it: the client's; the next gap, read in time at both ends, is not
    assert client_gaps(T0, [t - T0 for t in times], [stall]) == (0, 1, 2)
    assert first_read_late(T0, [1.02, 1.2], [stall]) is None  # up to 20 ms of a 1,020 ms TTFT: not a large share…
    short = Stall(T0 + 0.03, T0 + 0.06, "the meter's loop ran 30 ms late")
    assert first_read_late(T0, [0.05, 1.2], [short]) is short  # …up to 20 ms of 50 ms is
    assert first_read_late(T0, [0.5, 1.2], [stall]) is None


def test_a_last_chunk_read_late_by_a_large_share_of_the_decode_span_is_named():
    stall = Stall(T0 + 0.9, T0 + 1.2, "the meter's loop ran 300 ms late")
    assert last_read_late(T0, [0.1, 0.5, 1.2], [stall]) is stall  # 300 ms of a 1,100 ms decode span
    assert last_read_late(T0, [0.1, 0.5, 1.2], [Stall(T0 + 1.19, T0 + 1.2, "x")]) is None  # 10 ms of it
    assert last_read_late(T0, [0.1], [stall]) is None


def test_a_long_server_gap_read_a_little_late_stays_the_servers():
    stall = Stall(T0 + 1.195, T0 + 1.2, "the meter's loop ran 4 ms late")
    offsets = [0.99, 1.0, 1.2, 1.21]  # a 200 ms stall of the server, its end read up to 5 ms late
    # 5 ms of 200: the server's gap; the 10 ms after that late read is half uncertain: the client's
    assert client_gaps(T0, offsets, [stall]) == (2,)


def test_every_stream_stopping_at_once_is_the_servers_and_a_prefill_among_them_is_named():
    silence = (T0 + 0.3, T0 + 0.36)
    streams = [steady(60, silence=silence, sent=T0 + k * 0.001) for k in range(8)]
    gaps = attribute(streams)
    assert all(len(lane) == 1 and lane[0].cause == SERVER for lane in gaps)
    assert "stopped at once" in gaps[0][0].why and "(8)" in gaps[0][0].why
    long_prompt = RequestTiming(ok=True, t_sent_unix=T0 + 0.29, token_offsets_s=(0.075, 0.08), prompt_tokens=2000)
    named = attribute([*streams, long_prompt], [f"8 at once {k + 1}" for k in range(8)] + ["long 2000"])
    assert named[0][0].why == "the prefill of long 2000 (2,000 tokens) in the same step"
    assert named[-1] == ()  # two chunks: no median to hold a gap against


def test_a_stream_gapping_alone_while_others_read_is_of_unknown_cause_even_beside_a_prefill():
    alone = steady(60, silence=(T0 + 0.3, T0 + 0.36))
    others = [steady(60, sent=T0 + k * 0.001) for k in range(1, 4)]
    [gaps, *rest] = attribute([alone, *others])
    assert [g.cause for g in gaps] == [UNKNOWN] and "kept reading" in gaps[0].why
    assert all(lane == () for lane in rest)
    # A long prompt prefilling then did not stop the others: it is not what stopped this one either.
    long_prompt = RequestTiming(ok=True, t_sent_unix=T0 + 0.29, token_offsets_s=(0.075, 0.08), prompt_tokens=2000)
    assert attribute([alone, *others, long_prompt])[0][0].cause == UNKNOWN


def test_a_lone_stream_is_the_servers_when_its_own_clock_holds_the_gap_and_unknown_when_not():
    lone = steady(60, silence=(T0 + 0.3, T0 + 0.36))
    [[gap]] = attribute([lone])
    assert gap.cause == UNKNOWN and "no other stream" in gap.why
    span = lone.decode_span_s
    held = RequestTiming(**{**_fields(lone), "server_split": ServerSplit(decode_s=span - 0.001, output_tokens=60)})
    assert attribute([held])[0][0].cause == SERVER
    missed = RequestTiming(**{**_fields(lone), "server_split": ServerSplit(decode_s=span - 0.05, output_tokens=60)})
    assert attribute([missed])[0][0].cause == UNKNOWN


def test_the_clients_gaps_are_named_left_out_of_itl_and_counted():
    lone = steady(60, silence=(T0 + 0.3, T0 + 0.36))
    index = next(i for i, gap in enumerate(lone.itl_s) if gap > 0.03)
    theirs = RequestTiming(**{**_fields(lone), "client_gaps": (index,)})
    assert max(theirs.itl_s) < 0.02 and len(theirs.itl_s) == len(lone.itl_s) - 1
    [[gap]] = attribute([theirs])
    assert gap.cause == CLIENT and gap.index == index
    assert worst_gap([gap]) is gap and gap.line().startswith("60.0 ms, the client's")
    counts = count_by_cause([[gap], [gap]])
    assert counts == {SERVER: 0, CLIENT: 2, UNKNOWN: 0}
    assert counts_line(counts) == "2 gaps over 3× their stream's median: 2 the client's (left out of ITL)"
    assert counts_line(count_by_cause([[]])) == ""


def _fields(timing: RequestTiming) -> dict:
    return {name: getattr(timing, name) for name in RequestTiming.__dataclass_fields__}
