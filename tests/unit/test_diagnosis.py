from tui.core.diagnosis import LiveFigures, diagnose, saturated


def phases(findings):
    return [(f.phase, f.action.split(":")[0]) for f in findings]


def test_high_ttft_with_queue_and_full_kv_is_capacity():
    f = LiveFigures(ttft_s=2.0, waiting=5, kv_cache_usage=0.99)
    assert saturated(f)
    [finding] = diagnose(f)
    assert finding.phase == "prefill" and "capacity" in finding.action and "--gpu-memory-utilization" in finding.action


def test_high_ttft_with_queue_but_room_in_kv_is_queue():
    [finding] = diagnose(LiveFigures(ttft_s=2.0, waiting=3, kv_cache_usage=0.4))
    assert "queue" in finding.action


def test_long_prompt_without_prefix_hits_says_shorten_or_cache():
    [finding] = diagnose(LiveFigures(ttft_s=0.9, prompt_tokens=3000, waiting=0, prefix_cache_hit_rate=0.0))
    assert "--enable-prefix-caching" in finding.action and "3,000" in finding.seen


def test_long_prompt_with_prefix_hits_falls_to_batched_tokens():
    [finding] = diagnose(LiveFigures(ttft_s=0.9, prompt_tokens=3000, waiting=0, prefix_cache_hit_rate=0.8))
    assert "--max-num-batched-tokens" in finding.action


def test_low_ttft_says_nothing_about_prefill():
    assert diagnose(LiveFigures(ttft_s=0.03, prompt_tokens=3000)) == []


def test_ttft_far_above_prefill_floor_is_high_even_under_half_a_second():
    assert phases(diagnose(LiveFigures(ttft_s=0.3, prefill_floor_s=0.01))) == [("prefill", "raise --max-num-batched-tokens so more prefill lands in each step")]


def test_decode_far_below_ceiling_blames_the_serving_stack():
    [finding] = diagnose(LiveFigures(decode_tok_s=50, decode_ceiling_tok_s=209))
    assert finding.phase == "decode" and "serving stack" in finding.action and "24%" in finding.seen


def test_decode_near_ceiling_says_quantize_or_bandwidth():
    [finding] = diagnose(LiveFigures(decode_tok_s=200, decode_ceiling_tok_s=209))
    assert "quantize" in finding.action


def test_decode_in_between_says_nothing():
    assert diagnose(LiveFigures(decode_tok_s=150, decode_ceiling_tok_s=209)) == []


def test_long_context_names_kv_bytes():
    [finding] = diagnose(LiveFigures(context_tokens=8000, kv_bytes_per_token=131072))
    assert "1.05 GB" in finding.seen and "--kv-cache-dtype" in finding.action
