"""The engine's physics with exact numbers: step times, chunking, batching, the KV pool, prefix hits, preemption."""

import math

import pytest

from tui.core.hardware.devices import find_device
from tui.core.hardware.models import find_model
from tui.sim.blocks import BLOCK_SIZE, BlockPool, block_hashes
from tui.sim.physics import Engine, Sequence
from tui.sim.step_cost import COMPUTE_EFFICIENCY, STEP_OVERHEAD_S, ConfigError, EngineConfig, step_time_s

H100 = find_device("H100 SXM")
LLAMA_8B = find_model("8b")
CEILING_TOK_S = 3350e9 / 16e9  # the domain text's 209.4 tok/s


def config(**changes) -> EngineConfig:
    return EngineConfig(device=H100, layout=LLAMA_8B, **changes)


def seq(name: str, prompt: int, max_tokens: int, first_id: int = 0) -> Sequence:
    return Sequence(name, tuple(range(first_id, first_id + prompt)), max_tokens, arrival=0.0)


def run_until_done(engine: Engine, limit: int = 10_000) -> list:
    now, steps = 0.0, []
    while engine.has_work and len(steps) < limit:
        plan = engine.schedule(now)
        now += plan.duration_s
        steps.append((plan, engine.complete(plan, now)))
    return steps


def test_one_decode_step_reads_the_weights_once_plus_overhead():
    expected = (16e9 + 131072) / 3350e9 + STEP_OVERHEAD_S  # weights, plus writing the new token's KV
    assert step_time_s(config(), [(1, 0)]) == pytest.approx(expected, rel=1e-12)
    rate = 1 / expected
    assert 0.97 * CEILING_TOK_S < rate < CEILING_TOK_S


def test_kv_cache_read_adds_to_the_decode_step():
    kv_8k = 8000 * 2 * 32 * 8 * 128 * 2  # 1.05 GB, the domain text's "roughly 1 GB"
    expected = (16e9 + kv_8k + 131072) / 3350e9 + STEP_OVERHEAD_S
    assert step_time_s(config(), [(1, 8000)]) == pytest.approx(expected, rel=1e-12)


def test_prefill_is_compute_bound_with_the_attention_term():
    flops = 2 * 8e9 * 2000 + 4 * 32 * 4096 * 2000 * 1000
    expected = flops / (989e12 * COMPUTE_EFFICIENCY) + STEP_OVERHEAD_S
    assert step_time_s(config(), [(2000, 0)]) == pytest.approx(expected, rel=1e-12)
    assert expected > 10 * step_time_s(config(), [(1, 0)])


def test_int4_weights_quarter_the_weight_read():
    kv_s = 131072 / 3350e9
    sixteen = step_time_s(config(), [(1, 0)]) - STEP_OVERHEAD_S - kv_s
    four = step_time_s(config(bits=4), [(1, 0)]) - STEP_OVERHEAD_S - kv_s
    assert four == pytest.approx(sixteen / 4, rel=1e-9)


def test_kv_pool_is_memory_left_after_the_weights():
    expected = math.floor((0.9 * 80e9 - 16e9) / (131072 * BLOCK_SIZE))
    assert config().num_gpu_blocks == expected == 26702


def test_a_long_prompt_is_chunked_by_the_budget_and_samples_only_at_its_end():
    engine = Engine(config(max_num_batched_tokens=2048))
    engine.add(seq("a", 5000, 2))
    steps = run_until_done(engine)
    assert [plan.num_tokens for plan, _ in steps] == [2048, 2048, 904, 1]
    assert [len(tokens) for _, tokens in steps] == [0, 0, 1, 1]
    second = steps[1][0].items[0]
    assert second.context_before == 2048


def test_running_decodes_come_first_then_prefill_fills_the_budget():
    engine = Engine(config(max_num_batched_tokens=2048))
    engine.add(seq("a", 10, 50))
    plan = engine.schedule(0.0)
    engine.complete(plan, 1.0)
    engine.add(seq("b", 3000, 5, first_id=10_000))
    plan = engine.schedule(1.0)
    assert [(i.sequence.request_id, i.new_tokens) for i in plan.items] == [("a", 1), ("b", 2047)]


def test_a_request_that_came_after_a_late_steps_start_joins_the_next_step_and_is_never_timed_before_it_came():
    """The driver starts a step late on the loop at its deadline (the last step's end), which can be before a request
    that is already waiting arrived: that request joins the step after, and its queue, prefill and TTFT stay ≥ 0."""
    engine = Engine(config())
    engine.add(seq("a", 10, 50))
    engine.complete(engine.schedule(0.0), 0.01)
    engine.add(Sequence("b", tuple(range(100, 110)), 5, arrival=0.05))  # while the loop ran 40 ms behind
    plan = engine.schedule(0.01)
    assert [i.sequence.request_id for i in plan.items] == ["a"]
    engine.complete(plan, 0.02)
    late = Engine(config())  # nothing running: the step waits for the request instead
    late.add(Sequence("c", tuple(range(10)), 5, arrival=0.05))
    start = late.step_start(0.01)
    plan = late.schedule(start)
    assert start == 0.05 and [i.sequence.request_id for i in plan.items] == ["c"]
    late.complete(plan, start + plan.duration_s)
    [c] = plan.items
    assert c.sequence.scheduled_at == 0.05 and c.sequence.first_token_at > c.sequence.arrival
    assert engine.step_start(0.02) == 0.02, "with a step running, the next starts at its deadline"


def test_without_chunked_prefill_a_prompt_runs_whole():
    engine = Engine(config(enable_chunked_prefill=False, max_num_batched_tokens=131072))
    engine.add(seq("a", 5000, 1))
    plan = engine.schedule(0.0)
    assert plan.num_tokens == 5000
    assert len(engine.complete(plan, plan.duration_s)) == 1


def test_continuous_batching_stops_at_max_num_seqs_and_refills_when_one_ends():
    engine = Engine(config(max_num_seqs=2))
    engine.add(seq("short", 10, 1))
    engine.add(seq("long", 10, 3, first_id=100))
    engine.add(seq("late", 10, 2, first_id=200))
    plan = engine.schedule(0.0)
    assert [i.sequence.request_id for i in plan.items] == ["short", "long"] and len(engine.waiting) == 1
    engine.complete(plan, 1.0)  # "short" is done: its seat goes to "late" at the next step
    plan = engine.schedule(1.0)
    assert [(i.sequence.request_id, i.new_tokens) for i in plan.items] == [("long", 1), ("late", 10)]
    engine.complete(plan, 2.0)
    run_until_done(engine)
    assert engine.counters.generation_tokens == 6


def test_prefix_cache_hits_whole_blocks_and_recomputes_the_last_token():
    engine = Engine(config())
    engine.add(seq("a", 100, 1))
    run_until_done(engine)
    engine.add(seq("b", 100, 1))
    plan = engine.schedule(0.0)
    assert plan.items[0].context_before == 96  # (100 - 1) // 16 = 6 full blocks
    assert plan.items[0].new_tokens == 4
    assert engine.counters.prefix_cache_queries == 200
    assert engine.counters.prefix_cache_hits == 96


def test_prompt_of_exact_blocks_keeps_one_block_to_compute():
    engine = Engine(config())
    engine.add(seq("a", 32, 1))
    run_until_done(engine)
    engine.add(seq("b", 32, 1))
    assert engine.schedule(0.0).items[0].context_before == 16


def test_no_prefix_hits_when_caching_is_off():
    engine = Engine(config(enable_prefix_caching=False))
    for name in "ab":
        engine.add(seq(name, 100, 1))
        run_until_done(engine)
    assert engine.counters.prefix_cache_hits == 0


def small_pool(blocks: int, max_model_len: int) -> EngineConfig:
    utilization = (16e9 + (blocks + 0.5) * 131072 * BLOCK_SIZE) / 80e9
    return config(gpu_memory_utilization=utilization, max_model_len=max_model_len)


def test_full_pool_preempts_the_newest_and_still_finishes_everything():
    cfg = small_pool(10, 160)
    assert cfg.num_gpu_blocks == 10
    engine = Engine(cfg)
    engine.add(seq("a", 64, 90))
    engine.add(seq("b", 64, 90, first_id=1000))
    saw_full = False
    now = 0.0
    outputs = {"a": [], "b": []}
    while engine.has_work:
        plan = engine.schedule(now)
        saw_full |= engine.kv_cache_usage == 1.0 and bool(engine.waiting)
        now += plan.duration_s
        for token in engine.complete(plan, now):
            outputs[token.sequence.request_id].append(token.index)
    assert engine.counters.preemptions >= 1
    assert saw_full
    assert outputs == {"a": list(range(90)), "b": list(range(90))}
    assert engine.kv_cache_usage == 0.0


def test_abort_frees_the_blocks_at_once():
    engine = Engine(config())
    sequence = seq("a", 100, 50)
    engine.add(sequence)
    engine.complete(engine.schedule(0.0), 1.0)
    assert engine.pool.num_free == engine.pool.num_blocks - 7
    engine.abort(sequence)
    assert engine.pool.num_free == engine.pool.num_blocks
    assert not engine.has_work


def test_weights_that_do_not_fit_are_refused():
    with pytest.raises(ConfigError, match="do not fit"):
        Engine(EngineConfig(device=find_device("4090"), layout=find_model("llama-3.1-70b")))


def test_max_model_len_beyond_the_kv_pool_is_refused():
    with pytest.raises(ConfigError, match="max seq len"):
        small_pool(10, 1000).validate()


def test_block_pool_reuses_the_least_recently_freed_and_forgets_its_hash():
    pool = BlockPool(3)
    first = pool.allocate(2)
    hashes = block_hashes(list(range(32)))
    pool.register(first[0], hashes[0])
    pool.register(first[1], hashes[1])
    pool.free(first)
    assert pool.lookup(hashes) == first
    third = pool.allocate(2)
    assert third[0] == 2  # never used comes first
    assert third[1] == first[1]  # the tail block is reused before the head
    assert pool.lookup(hashes) == [first[0]]
