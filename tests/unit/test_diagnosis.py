from dataclasses import replace

import pytest

from tui.core.view.diagnosis import LiveFigures, diagnose, saturated


def phases(findings):
    return [(f.phase, f.action.split(":")[0]) for f in findings]


def test_high_ttft_with_queue_and_full_kv_is_capacity():
    f = LiveFigures(ttft_s=2.0, waiting=5, kv_cache_usage=0.99, engine="vllm")
    assert saturated(f)
    [finding] = diagnose(f)
    assert finding.phase == "prefill" and "capacity" in finding.action and "--gpu-memory-utilization" in finding.action


def test_high_ttft_with_queue_but_room_in_kv_is_queue():
    [finding] = diagnose(LiveFigures(ttft_s=2.0, waiting=3, kv_cache_usage=0.4))
    assert "queue" in finding.action


def test_long_prompt_without_prefix_hits_says_shorten_or_cache():
    [finding] = diagnose(LiveFigures(ttft_s=0.9, prompt_tokens=3000, waiting=0, prefix_cache_hit_rate=0.0, engine="vllm"))
    assert "--enable-prefix-caching" in finding.action and "3,000" in finding.seen


def test_with_prefix_caching_already_on_it_is_not_advised_again():
    # Real vLLM's header said enable_prefix_caching=True while the advice said to enable it.
    [finding] = diagnose(LiveFigures(ttft_s=0.9, prompt_tokens=3000, waiting=0, prefix_cache_hit_rate=0.0,
                                     prefix_caching_on=True, engine="vllm"))
    assert "--enable-prefix-caching" not in finding.action
    assert "keep its start identical across requests (prefix caching is on)" in finding.action


def test_long_prompt_with_prefix_hits_falls_to_batched_tokens():
    [finding] = diagnose(LiveFigures(ttft_s=0.9, prompt_tokens=3000, waiting=0, prefix_cache_hit_rate=0.8, engine="vllm"))
    assert finding.action == "raise --max-num-batched-tokens so more prefill lands in each step"


def test_low_ttft_says_nothing_about_prefill():
    assert diagnose(LiveFigures(ttft_s=0.03, prompt_tokens=3000)) == []


def test_ttft_far_above_prefill_floor_is_high_even_under_half_a_second():
    assert phases(diagnose(LiveFigures(ttft_s=0.3, prefill_floor_s=0.01, engine="vllm"))) == [
        ("prefill", "raise --max-num-batched-tokens so more prefill lands in each step")]


def test_decode_far_below_ceiling_blames_the_serving_stack():
    [finding] = diagnose(LiveFigures(decode_tok_s=50, decode_ceiling_tok_s=209))
    assert finding.phase == "decode" and "serving stack" in finding.action and "24%" in finding.seen


def test_decode_near_ceiling_says_quantize_or_bandwidth():
    [finding] = diagnose(LiveFigures(decode_tok_s=200, decode_ceiling_tok_s=209))
    assert "quantize" in finding.action


def test_decode_in_between_says_nothing():
    assert diagnose(LiveFigures(decode_tok_s=150, decode_ceiling_tok_s=209)) == []


def test_long_context_names_kv_bytes():
    [finding] = diagnose(LiveFigures(context_tokens=8000, kv_bytes_per_token=131072, engine="vllm"))
    assert "1.05 GB" in finding.seen and "--kv-cache-dtype" in finding.action


# ---- each rule in each engine's words -------------------------------------------------------------

RULES = {
    "capacity": LiveFigures(ttft_s=2.0, waiting=5, kv_cache_usage=0.99),
    "queue": LiveFigures(ttft_s=2.0, waiting=3, kv_cache_usage=0.4),
    "prefix": LiveFigures(ttft_s=0.9, prompt_tokens=3000, waiting=0, prefix_cache_hit_rate=0.0),
    "batch": LiveFigures(ttft_s=0.9, prompt_tokens=200),
    "stack": LiveFigures(decode_tok_s=50, decode_ceiling_tok_s=209),
    "cpu": LiveFigures(decode_tok_s=0.6, decode_ceiling_tok_s=6, on_cpu=True),
    "bandwidth": LiveFigures(decode_tok_s=200, decode_ceiling_tok_s=209),
    "context": LiveFigures(context_tokens=8000),
}

EXPECTED = {
    "vllm": {
        "capacity": ["--gpu-memory-utilization", "--max-model-len"],
        "queue": ["--max-num-seqs"],
        "prefix": ["--enable-prefix-caching", "--max-num-batched-tokens"],
        "batch": ["raise --max-num-batched-tokens"],
        "stack": ["lower --max-num-batched-tokens"],
        "cpu": ["VLLM_CPU_OMP_THREADS_BIND"],
        "bandwidth": ["--quantization fp8"],
        "context": ["--kv-cache-dtype fp8"],
    },
    "sglang": {
        "capacity": ["--mem-fraction-static", "--context-length"],
        "queue": ["--max-running-requests"],
        "prefix": ["radix cache", "--disable-radix-cache", "--chunked-prefill-size"],
        "batch": ["raise --chunked-prefill-size"],
        "stack": ["lower --chunked-prefill-size"],
        "cpu": ["SGLANG_CPU_OMP_THREADS_BIND"],
        "bandwidth": ["--quantization fp8"],
        "context": ["--kv-cache-dtype fp8_e5m2"],
    },
    "llamacpp": {
        "capacity": ["-c/--ctx-size"],
        "queue": ["-np/--parallel", "-c"],
        "prefix": ["cache_prompt", "--cache-reuse", "-b/-ub"],
        "batch": ["raise -b/-ub (the batch sizes)"],
        "stack": ["-ngl 99", "lower -b/-ub"],
        "cpu": ["-t/--threads"],
        "bandwidth": ["GGUF", "Q4_K_M"],
        "context": ["-ctk q8_0 -ctv q8_0"],
    },
    "ollama": {
        "capacity": ["num_ctx", "OLLAMA_NUM_PARALLEL"],
        "queue": ["raise OLLAMA_NUM_PARALLEL"],
        "prefix": ["cached prefix", "num_batch"],
        "batch": ["raise the num_batch option"],
        "stack": ["ollama ps", "100% GPU"],
        "cpu": ["num_thread"],
        "bandwidth": ["quant tag"],
        "context": ["OLLAMA_KV_CACHE_TYPE=q8_0"],
    },
}

OWN_WORDS = {
    "vllm": ["--max-num-batched-tokens", "--gpu-memory-utilization", "--enable-prefix-caching", "--max-num-seqs",
             "--max-model-len", "VLLM_", "--kv-cache-dtype fp8)"],
    "sglang": ["--chunked-prefill-size", "--mem-fraction-static", "--max-running-requests", "radix", "SGLANG_",
               "--context-length", "fp8_e5m2"],
    "llamacpp": ["-np/", "-b/-ub", "-ngl", "-ctk", "--ctx-size", "cache_prompt", "--cache-reuse", "-t/--threads", "GGUF"],
    "ollama": ["OLLAMA_", "num_ctx", "num_batch", "num_thread", "ollama ps", "quant tag"],
}
"""Flags only that engine has: the bug was vLLM's flags named on llama.cpp, Ollama and SGLang."""


def _only(rule, engine):
    [finding] = diagnose(replace(RULES[rule], engine=engine))
    return finding.action


@pytest.mark.parametrize("engine", sorted(EXPECTED))
@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_rule_names_the_engines_own_knob_and_no_other_engines(rule, engine):
    action = _only(rule, engine)
    for word in EXPECTED[engine][rule]:
        assert word in action, (engine, rule, action)
    foreign = [w for other, words in OWN_WORDS.items() if other != engine for w in words if w in action]
    assert foreign == [], (engine, rule, action)


@pytest.mark.parametrize("engine", [None, "tgi", "lmstudio"])
@pytest.mark.parametrize("rule", sorted(RULES))
def test_an_unknown_engine_gets_the_advice_without_any_flag(rule, engine):
    action = _only(rule, engine)
    assert " -" not in action and "--" not in action and "=" not in action and "(" not in action.replace("(chunk)", "")
    assert not [w for words in OWN_WORDS.values() for w in words if w in action], action


def test_unknown_engine_still_says_what_to_do():
    assert _only("prefix", None) == ("shorten the prompt or turn on the server's prefix caching; "
                                     "raising the prefill batch (chunk) size fits more prefill per step")
    assert "serving stack" in _only("stack", None) and "threads" in _only("cpu", None)


def test_the_openai_kind_reads_as_vllm():
    for rule in RULES:
        assert _only(rule, "openai") == _only(rule, "vllm")


@pytest.mark.parametrize("engine", [None, *sorted(EXPECTED)])
def test_far_below_ceiling_on_a_cpu_is_threads_not_the_serving_stack(engine):
    """A one-thread CPU server decodes at a tenth of the bandwidth ceiling because it is compute-bound."""
    action = _only("cpu", engine)
    assert action.startswith("compute, not bandwidth") and "threads" in action and "physical cores" in action
    assert "serving stack" not in action and "prefills interrupt" not in action
    assert "serving stack" in _only("stack", engine)  # the same share on a GPU still blames the stack


def test_on_a_cpu_near_the_ceiling_is_still_bandwidth():
    [finding] = diagnose(LiveFigures(decode_tok_s=5.5, decode_ceiling_tok_s=6, on_cpu=True, engine="llamacpp"))
    assert finding.action.startswith("bandwidth-bound") and "GGUF" in finding.action


def test_one_thread_llamacpp_on_a_cpu_with_a_long_prompt():
    """The case the issue reports: TTFT high on a long prompt and decode at 10 % of the CPU ceiling."""
    findings = diagnose(LiveFigures(ttft_s=4.0, prompt_tokens=2000, decode_tok_s=0.6, decode_ceiling_tok_s=6,
                                    on_cpu=True, engine="llamacpp"))
    assert [f.phase for f in findings] == ["prefill", "decode"]
    text = " ".join(f.action for f in findings)
    assert "cache_prompt" in text and "-t/--threads" in text and "10%" in findings[1].seen
    assert "--max-num-batched-tokens" not in text and "--enable-prefix-caching" not in text


@pytest.mark.parametrize("figures", [
    LiveFigures(decode_tok_s=50, decode_ceiling_tok_s=209),
    LiveFigures(decode_tok_s=205, decode_ceiling_tok_s=209),
    LiveFigures(ttft_s=2.0, waiting=3, kv_cache_usage=0.4),
    LiveFigures(context_tokens=120_000, kv_bytes_per_token=131072.0),
])
def test_a_finding_shown_after_its_phase_does_not_repeat_the_phase(figures):
    """The screen shows "decode: 205 tok/s is 98% of …", never "decode: decode 205 tok/s …"."""
    [finding] = diagnose(figures)
    assert not finding.seen.lower().startswith(finding.phase), f"{finding.phase}: {finding}"


def test_a_stall_from_another_requests_prefill_comes_first_and_explains_a_low_rate():
    findings = diagnose(LiveFigures(decode_tok_s=80.0, decode_ceiling_tok_s=209.0, engine="vllm", stalled_s=0.28,
                                    stalled_by="the prefill of long 2000 (2,000 tokens) in the same step"))
    assert [f.seen for f in findings] == ["stalled 280 ms by the prefill of long 2000 (2,000 tokens) in the same step"]
    assert "lower --max-num-batched-tokens" in findings[0].action
