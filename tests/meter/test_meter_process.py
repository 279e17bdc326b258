"""The meter process: it times as the in-process meter does, on its parent's clock, shares streams, and dies cleanly."""

from __future__ import annotations

import asyncio
import os
import signal
from contextlib import aclosing

import pytest

from tui.meter.link import LoopSink, MeterEnded
from tui.meter.pool import MeterPool
from tui.meter.protocol import Failed, OpenServer, Stream, WarmUp
from tui.meter.service import MeterService
from tui.sources import wall_clock
from tui.sources.errors import ServerUnavailable
from tui.sources.http import make_client
from tui.sources.meter import ChunksArrived, LocalMeter
from tui.sources.stream import RequestFinished, RequestSent, StreamRequest

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def request(tokens: int = 32) -> StreamRequest:
    return StreamRequest("openai", MODEL, "hello " * 40, tokens)


@pytest.fixture
def pool():
    ended: list[str] = []
    meters = MeterPool(1, on_ended=ended.append)
    meters.ended = ended
    yield meters
    meters.close()


async def test_a_meter_process_reports_the_send_then_frames_then_the_exact_record(sim_url, pool):
    async with make_client(sim_url) as client:
        meter = pool.meter_for(client)
        connect_s = await meter.warm_up("/v1/models")
        events = [event async for event in meter.stream(request(), connect_s, text=True)]
    assert isinstance(events[0], RequestSent) and isinstance(events[-1], RequestFinished)
    frames = [event for event in events if isinstance(event, ChunksArrived)]
    timing = events[-1].timing
    assert timing.ok and timing.output_tokens == 32
    assert [offset for frame in frames for offset in frame.offsets_s] == list(timing.token_offsets_s)
    assert "".join(frame.text for frame in frames) == timing.text and timing.text
    assert events[0].t_sent_unix == timing.t_sent_unix
    assert len(frames) < 32, "frames carry many chunks each, not one message per token"


async def test_the_meter_stamps_on_its_parents_clock(sim_url):
    """A parent whose clock is an hour off hands that offset down: the meter's send times are on it, not its own."""
    real = wall_clock.offset_s()
    wall_clock.set_offset(real + 3600.0)
    meters = MeterPool(1)
    try:
        async with make_client(sim_url) as client:
            before = wall_clock.now_unix()
            timing = await meters.meter_for(client).measure(request(4))
            after = wall_clock.now_unix()
    finally:
        meters.close()
        wall_clock.set_offset(real)
    assert timing.ok and before <= timing.t_sent_unix <= after


async def test_two_meters_share_the_streams_and_every_record_is_whole(sim_url):
    meters = MeterPool(2)
    try:
        async with make_client(sim_url) as client:
            meter = meters.meter_for(client)
            await meter.warm_up("/v1/models", 8)
            started = asyncio.gather(*(meter.measure(request(16)) for _ in range(8)))
            await asyncio.sleep(0.05)
            in_flight = [link.in_flight for link in meters.links]
            timings = await started
    finally:
        meters.close()
    assert in_flight == [4, 4], "the least busy meter takes each stream"
    # (a chunk per token; a few tokens end inside a UTF-8 sequence and carry no text, as vLLM sends them)
    assert all(t.ok and t.output_tokens == 16 and t.token_ends[-1] == 15 for t in timings)
    assert len({t.t_sent_unix for t in timings}) == 8


async def test_a_killed_meter_ends_its_streams_keeping_what_was_read_and_the_next_send_starts_a_new_one(slow_sim_url, pool):
    async with make_client(slow_sim_url) as client:
        meter = pool.meter_for(client)
        read = 0
        async with aclosing(meter.stream(request(64))) as events:
            async for event in events:
                if isinstance(event, ChunksArrived):
                    read += len(event.offsets_s)
                    if read >= 4:
                        first_pid = pool.links[0].pid
                        os.kill(first_pid, signal.SIGKILL)
                elif isinstance(event, RequestFinished):
                    died = event.timing
        assert not died.ok and "the meter process died (killed by SIGKILL" in died.error
        assert len(died.token_offsets_s) >= 4, "what was read before it died is kept"
        await asyncio.sleep(0.1)
        assert pool.ended and pool.ended[0].startswith("the meter process died")
        again = await meter.measure(request(4))
    assert again.ok and pool.links[0].pid not in (None, first_pid)


async def test_closing_a_stream_early_stops_it_in_the_meter_and_a_warm_up_to_nothing_says_so(slow_sim_url, pool):
    async with make_client(slow_sim_url) as client:
        meter = pool.meter_for(client)
        async with aclosing(meter.stream(request(64))) as events:
            async for event in events:
                if isinstance(event, ChunksArrived):
                    break
        assert pool.links[0].in_flight == 0
        assert (await meter.measure(request(2))).ok
    async with make_client("http://127.0.0.1:1") as nowhere:
        with pytest.raises(ServerUnavailable, match="connection refused"):
            await pool.meter_for(nowhere).warm_up("/v1/models")


async def test_a_stream_that_hits_a_bug_in_the_meter_ends_as_a_failed_request_and_nothing_waits(sim_url, monkeypatch):
    """Not a SourceError (those are the stream's answer): the meter tells its parent, which ends the job with it."""
    async def buggy(self, request, connect_s=None, text=False):
        yield RequestSent(wall_clock.now_unix())
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(LocalMeter, "stream", buggy)
    said: list[object] = []
    service = MeterService(said.append)
    service.handle(OpenServer(1, make_client(sim_url).stream_target))
    service.handle(Stream(7, 1, request(4), None, False))
    for _ in range(100):
        if any(isinstance(event, Failed) for event in said):
            break
        await asyncio.sleep(0.01)
    await service.close()
    assert Failed(7, "internal error in the meter: ZeroDivisionError: a bug") in said

    pool = MeterPool(1)
    try:
        link = pool.links[0]
        sink = LoopSink()
        link.submit(8, WarmUp(8, 1, "/v1/models", 1), sink, 1, make_client(sim_url).stream_target)
        link._deliver(Failed(8, "internal error in the meter: ZeroDivisionError: a bug"))
        assert await asyncio.wait_for(sink.queue.get(), 5) == MeterEnded("internal error in the meter: ZeroDivisionError: a bug")
        assert link.in_flight == 0
    finally:
        pool.close()
