"""The live session the main screen shows, without Textual: requests through their life, what a publish
gives the panes, the selection, the answer's text, the diagnosis, and the ceiling."""

from __future__ import annotations

import pytest

from tui.core.measure.gaps import worst_gap
from tui.core.measure.records import RequestTiming
from tui.core.runs.sessions import SessionLog
from tui.core.state.live import KEEP_REQUESTS, LaneTokens, LiveSession, said_on
from tui.core.state.server_state import ServerState
from tui.core.state.server_watch import Served, ServerWatch
from tui.core.telemetry.readings import GpuReading, MetricsSnapshot
from tui.core.view.lane_figures import IN_FLIGHT
from tui.core.view.timeline import ALIGNED, KEEP_LANES, WALL_CLOCK

T0 = 1_700_000_000.0
CEILING = (209.0, 131072.0, 16e9)


def done(sent: float, ttft_s: float = 0.05, tokens: int = 20, itl_s: float = 0.005, **fields) -> RequestTiming:
    offsets = tuple(ttft_s + i * itl_s for i in range(tokens))
    return RequestTiming(ok=True, t_sent_unix=sent, token_offsets_s=offsets, prompt_tokens=200, output_tokens=tokens, **fields)


def send_one(live: LiveSession, label: str = "short 200", sent: float = T0) -> int:
    request_id = live.send(1)
    live.started(request_id, label, sent, 200)
    return request_id


def test_a_request_is_in_flight_with_its_offsets_then_whole_with_its_record():
    live = LiveSession(ServerWatch(CEILING))
    request_id = send_one(live)
    live.tokens([LaneTokens.detailed(request_id, (0.05, 0.055), "Hel")])
    shown = live.publish()
    assert [lane.label for lane in shown.lanes] == ["short 200"] and shown.timings[0].token_offsets_s == (0.05, 0.055)
    assert shown.answer == "Hel" and not shown.answer_final
    assert live.diagnosis() == f"short 200: {IN_FLIGHT}"
    record = done(T0)
    live.completed(request_id, record)
    shown = live.publish()
    assert shown.timings == [record] and shown.answer == "" and shown.answer_final
    assert IN_FLIGHT not in live.diagnosis()


def test_a_lane_without_offsets_keeps_only_its_first_arrival_until_its_record():
    live = LiveSession(ServerWatch())
    request_id = send_one(live)
    live.tokens([LaneTokens(request_id, 5, 0.07, 0.09)])
    live.tokens([LaneTokens(request_id, 5, 0.10, 0.12)])
    assert live.publish().timings[0].token_offsets_s == (0.07,)


def test_only_the_newest_request_of_the_latest_send_writes_the_answer():
    live = LiveSession(ServerWatch())
    first = live.send(8)
    for n in range(8):
        live.started(first + n, f"8 at once {n + 1}", T0, 200)
    live.tokens([LaneTokens.detailed(first, (0.1,), "not this"), LaneTokens.detailed(first + 7, (0.1,), "this")])
    assert live.publish().answer == "this"
    newer = live.send(1)  # a new send: the batch's text still arriving is not its answer
    live.tokens([LaneTokens.detailed(first + 7, (0.2,), " late")])
    live.started(newer, "typed", T0 + 1, None)
    live.tokens([LaneTokens.detailed(newer, (0.1,), "typed answer")])
    assert live.publish().answer == "typed answer"


def test_the_load_dials_requests_join_the_timeline_but_not_the_answer_nor_the_selection():
    live = LiveSession(ServerWatch())
    for n in range(2):
        typed = live.send(1)
        live.started(typed, f"typed {n}", T0 + n, None)
    live.tokens([LaneTokens.detailed(typed, (0.1,), "the answer")])
    live.publish()
    live.select(1)  # on "typed 0"
    load = live.take_ids(1)
    assert load == typed + 1
    live.started(load, "load 1", T0 + 2, 200, follow=False)
    live.tokens([LaneTokens.detailed(load, (0.1,), "")])
    live.completed(load, done(T0 + 2))
    shown = live.publish()
    assert [lane.label for lane in shown.lanes] == ["typed 0", "typed 1", "load 1"] and shown.batch_of == [0, 1, 2]
    assert shown.selected_back == 2 and live.diagnosis().startswith("typed 0"), "the selection stays on its request"
    assert shown.answer is None and not shown.answer_final, "the load's end is not the answer's"
    typed = live.send(1)
    assert typed == load + 1, "ids the load took are no send's"
    live.started(typed, "typed 2", T0 + 3, None)
    later = live.take_ids(1)
    live.started(later, "load 2", T0 + 3.1, 200, follow=False)
    assert live.publish().selected_back == 1, "a send's lane is selected, the load's after it or not"


def test_a_keys_send_sets_the_view_v_switches_it_and_the_load_dials_arrivals_leave_it_be():
    live = LiveSession(ServerWatch())
    first = send_one(live, sent=T0)
    live.completed(first, done(T0))
    live.publish()
    assert live.view == ALIGNED, "one request alone: each lane from its own send"
    load_ids = []
    for n in range(6):  # arriving alone, some while an earlier one still streams (its default would be wall clock)
        request_id = live.take_ids(1)
        live.started(request_id, f"load {n + 1}", T0 + 1 + 0.05 * n, 200, follow=False)
        load_ids.append(request_id)
        live.publish()
        assert live.view == ALIGNED, f"load {n + 1} flipped the view"
    live.toggle_view()
    for request_id in load_ids:
        live.completed(request_id, done(T0 + 1))
        live.publish()
    assert live.view == WALL_CLOCK, "v holds while the load's lanes come and go"
    live.toggle_view()
    assert live.view == ALIGNED
    among = live.send(1)
    late = live.take_ids(1)
    live.started(late, "load 7", T0 + 2, 200, follow=False)
    live.started(among, "long 2000", T0 + 2.01, 2000)
    live.publish()
    assert live.view == WALL_CLOCK, "a key's send among running requests: one wall clock"
    live.toggle_view()
    eight = live.send(8)
    for n in range(8):
        live.started(eight + n, f"8 at once {n + 1}", T0 + 10, 200)
    live.publish()
    assert live.view == WALL_CLOCK, "a batch at once: one wall clock"


def test_the_oldest_requests_past_the_keep_are_dropped_and_a_late_record_for_one_is_ignored():
    live = LiveSession(ServerWatch())
    ids = [send_one(live, sent=T0 + n) for n in range(KEEP_REQUESTS + 3)]
    shown = live.publish()
    assert len(shown.timings) == KEEP_REQUESTS == len(live)
    assert live.record(ids[0]) is None and live.record(ids[-1]) is not None
    live.completed(ids[0], done(T0))
    assert len(live.publish().timings) == KEEP_REQUESTS


def test_the_selection_moves_among_kept_lanes_and_a_new_send_selects_the_newest():
    live = LiveSession(ServerWatch())
    for n in range(3):
        request_id = send_one(live, f"r{n}", T0 + n)
        if n:  # r0 stays in flight: its diagnosis names it
            live.completed(request_id, done(T0 + n))
    live.publish()
    live.select(1)
    live.select(1)
    live.select(1)  # past the oldest: stays on it
    assert live.selected_back == 2 and live.diagnosis() == f"r0: {IN_FLIGHT}"
    live.select(-1)
    assert live.publish().selected_back == 1  # no new send: the same request stays selected
    send_one(live, "r3", T0 + 5)
    assert live.publish().selected_back == 0
    assert live.diagnosis() == f"r3: {IN_FLIGHT}"


def test_a_batch_bigger_than_the_lanes_kept_stays_whole_and_selectable():
    live = LiveSession(ServerWatch())
    count = KEEP_LANES + 4
    first = live.send(count)
    for n in range(count):
        live.started(first + n, f"load {n + 1}", T0, 200)
    assert len(live.publish().timings) == count
    for _ in range(count + 5):
        live.select(1)
    assert live.selected_back == count - 1


def test_clumped_arrivals_are_flagged_and_kept_out_of_the_diagnosis():
    live = LiveSession(ServerWatch(CEILING))
    request_id = send_one(live)
    clumped = done(T0, tokens=40, itl_s=0.0)  # 40 chunks at one instant: the delivery, not the generation
    live.completed(request_id, clumped)
    [shown] = live.publish().timings
    assert shown.burst and not clumped.burst
    assert "decode" not in live.diagnosis()


def test_clear_empties_the_timeline_and_nothing_else():
    live = LiveSession(ServerWatch(CEILING))
    live.server.server_up(Served("openai", "m"), fresh=True)
    before = send_one(live)
    live.publish()
    live.clear()
    shown = live.publish()
    assert shown.timings == [] and shown.lanes == [] and live.diagnosis() == ""
    assert live.server.served == Served("openai", "m") and live.server.server_fresh is False  # a request was sent
    live.completed(before, done(T0))  # sent before the clear, ended after: kept, not drawn
    after = send_one(live)
    shown = live.publish()
    assert [t.ttft_s for t in shown.kept] == [done(T0).ttft_s, None], "the roofline and traffic view still read both"
    assert len(shown.timings) == 1 and shown.timings[0] is shown.kept[-1] and after > before


def test_a_given_ceiling_wins_and_an_unknown_server_has_none_until_it_is_described():
    assert LiveSession(ServerWatch(CEILING)).server.decode_ceiling_tok_s == 209.0
    live = LiveSession(ServerWatch(server_is_local=True))
    assert live.server.decode_ceiling_tok_s is None
    live.server.gpu_sampled(())  # no GPU here: a local server runs on the CPU
    assert live.server.derived is None  # the model is not known yet
    live.server.server_up(Served("openai", "meta-llama/Llama-3.1-8B-Instruct"), fresh=None)
    assert live.server.derived is not None and live.server.derived.cpu_row and live.server.decode_ceiling_tok_s > 0


def test_a_gpu_ceiling_is_the_devices_bandwidth_over_the_weights():
    live = LiveSession(ServerWatch(server_is_local=True))
    live.server.server_up(Served("openai", "meta-llama/Llama-3.1-8B-Instruct"), fresh=None)
    live.server.gpu_sampled((GpuReading(index="0", name="H100", peak_bw_gbs=3350.0, server_mem_bytes=20e9),))
    assert not live.server.derived.cpu_row
    assert live.server.decode_ceiling_tok_s == pytest.approx(3350e9 / live.server.derived.weight_bytes, rel=1e-6)


def test_the_diagnosis_reads_the_latest_scrape():
    live = LiveSession(ServerWatch(CEILING))
    live.server.server_up(Served("openai", "m"), fresh=False)
    request_id = send_one(live)
    live.completed(request_id, done(T0, ttft_s=2.0))
    live.publish()
    assert "max-num-batched-tokens" in live.diagnosis()  # a slow TTFT with nothing waiting: the prefill's share
    live.server.scraped(MetricsSnapshot(t_unix=T0, engine="vllm", window_s=1.0, waiting=12.0, kv_cache_usage=0.99))
    assert "12 waiting and the KV pool 99% full → capacity" in live.diagnosis()


@pytest.mark.parametrize(("value", "expected"), [("True", True), ("false", False), (None, None), ("yes", None)])
def test_config_booleans_as_vllm_writes_them(value, expected):
    assert said_on(value) is expected


def test_the_session_log_keeps_the_one_before_and_files_requests_by_when_they_were_sent():
    from datetime import UTC, datetime

    log = SessionLog("http://h:8000")
    assert log.current is None and not log.has_before
    first = log.open(datetime.fromtimestamp(T0, UTC))
    second = log.open(datetime.fromtimestamp(T0 + 60, UTC), ("process_start_time changed",))
    third = log.open(datetime.fromtimestamp(T0 + 120, UTC))
    assert log.sessions == [second, third] and log.has_before and third.number == 3
    assert log.sent_in(T0 + 90) is second and log.sent_in(T0 + 130) is third and log.sent_in(T0 + 10) is None
    assert not log.identified(2, {"model": "m"}) and second.identity == {"model": "m"}
    assert log.identified(3, {"model": "n"}) and first.identity is None


def test_a_stream_held_by_another_requests_prefill_is_diagnosed_as_that_not_as_its_bandwidth():
    """Two streams decoding at 5 ms a token stop for 300 ms together while a 2,000-token prompt prefills."""
    live = LiveSession(ServerWatch(CEILING))
    stall_at, stall_s = 0.2, 0.3

    def stalled(sent: float) -> RequestTiming:
        offsets = [0.05 + i * 0.005 for i in range(31)]
        offsets += [offsets[-1] + stall_s + i * 0.005 for i in range(1, 40)]
        return RequestTiming(ok=True, t_sent_unix=sent, token_offsets_s=tuple(offsets), prompt_tokens=200, output_tokens=len(offsets))

    decoding = [send_one(live, f"8 at once {n}", T0) for n in (1, 2)]
    long_id = live.send(1)
    live.started(long_id, "long 2000", T0 + 0.2, 2000)
    for request_id in decoding:
        live.completed(request_id, stalled(T0))
    live.completed(long_id, RequestTiming(ok=True, t_sent_unix=T0 + stall_at - 0.01, prompt_tokens=2000, output_tokens=2,
                                          token_offsets_s=(stall_s + 0.005, stall_s + 0.01)))
    live.publish()
    live.select(1)  # the second stream
    said = live.diagnosis()
    assert said.startswith("8 at once 2: decode stalled 305 ms by the prefill of long 2000 (2,000 tokens)"), said
    assert "lower the prefill batch (chunk) size" in said and "quantize" not in said


def test_the_header_says_what_the_session_knows_of_the_server_through_an_outage_and_a_restart():
    live = LiveSession(ServerWatch(header=ServerState(url="http://h:8000")))
    assert live.server.header == ServerState(url="http://h:8000")
    live.server.server_up(Served("openai", "meta-llama/Llama-3.1-8B-Instruct"), fresh=True, max_model_len=8192)
    assert (live.server.header.kind, live.server.header.model, live.server.header.max_model_len) == ("openai", "meta-llama/Llama-3.1-8B-Instruct", 8192)
    live.server.server_down(T0, "connection refused")
    live.server.server_down(T0 + 5, "connection refused")
    assert live.server.header.down_since == T0, "an outage keeps its first moment"
    live.server.identified({"max_num_batched_tokens": "2048"})
    snapshot = MetricsSnapshot(t_unix=T0 + 9, engine="vllm", window_s=1.0, engine_config={"block_size": "16"})
    assert live.server.scraped(snapshot) is True and live.server.header.down_since is None
    assert live.server.header.config == "max_num_batched_tokens=2048 block_size=16", "the engine's config, the simulator's flags for what it lacks"
    assert live.server.scraped(snapshot) is False, "only the first answer after an outage brings it back"
    live.server.restarting("--max-num-batched-tokens 2048 → 256")
    live.server.restart_progress(12.4, "loading\x1b[31m weights\n")
    note = live.server.header.note
    assert note.startswith("restarting: --max-num-batched-tokens 2048 → 256 · 12 s: loading")
    assert "\x1b" not in note and "\n" not in note, "the command's log line is untrusted: one line, no escapes"
    live.server.restart_ended()
    assert live.server.header.note is None


def test_the_headers_ceiling_is_the_sessions_given_or_derived_with_its_device():
    assert LiveSession(ServerWatch(CEILING)).server.header.ceiling_tok_s == 209.0 and LiveSession(ServerWatch(CEILING)).server.header.device is None
    live = LiveSession(ServerWatch(server_is_local=True))
    live.server.server_up(Served("openai", "meta-llama/Llama-3.1-8B-Instruct"), fresh=None)
    live.server.gpu_sampled((GpuReading(index="0", name="H100", peak_bw_gbs=3350.0, server_mem_bytes=20e9),))
    assert live.server.header.ceiling_tok_s == live.server.decode_ceiling_tok_s and live.server.header.device == live.server.derived.device


def test_a_gap_is_named_alike_by_the_timeline_and_the_diagnosis_when_its_cause_is_not_a_kept_lane():
    """A long prompt's prefill under 32 streams' stall, the prompt sent just before them: the streams are the lanes
    kept, the prompt is not, yet it is still one of the requests their gaps are judged against (the timeline once
    judged only its lanes, and left the gap unnamed while the diagnosis named it)."""
    live = LiveSession(ServerWatch(CEILING))
    long_id = live.send(1)
    live.started(long_id, "long 2000", T0, 2000)
    streams = live.send(KEEP_LANES)
    for n in range(KEEP_LANES):
        live.started(streams + n, f"32 at once {n + 1}", T0 + 0.3, 200)
    offsets = [0.05 + i * 0.005 for i in range(31)]
    offsets += [offsets[-1] + 0.3 + i * 0.005 for i in range(1, 40)]
    for n in range(KEEP_LANES):
        live.completed(streams + n, RequestTiming(ok=True, t_sent_unix=T0 + 0.3, token_offsets_s=tuple(offsets),
                                                  prompt_tokens=200, output_tokens=len(offsets)))
    live.completed(long_id, RequestTiming(ok=True, t_sent_unix=T0, prompt_tokens=2000, output_tokens=2,
                                          token_offsets_s=(0.82, 0.83)))
    shown = live.publish()
    assert len(shown.timings) == KEEP_LANES + 1 and len(shown.lanes) == KEEP_LANES
    assert all(lane.label != "long 2000" for lane in shown.lanes)
    assert all(worst_gap(lane.gaps).why.startswith("the prefill of long 2000") for lane in shown.lanes)
    assert live.diagnosis().startswith("32 at once 32: decode stalled 305 ms by the prefill of long 2000")
