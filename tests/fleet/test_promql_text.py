"""PromQL text: escaping, matchers, selectors and each figure's query, as strings (no Prometheus)."""

import pytest

from tui.core.fleet import promql
from tui.core.fleet.queries import Discovered, Want, family_names, plan
from tui.core.fleet.promql import Matcher, escape, parse_matcher, selector


@pytest.mark.parametrize(("raw", "escaped"), [
    ("plain", "plain"),
    ('say "hi"', 'say \\"hi\\"'),
    ("two\nlines", "two\\nlines"),
    ("back\\slash", "back\\\\slash"),
    ('\\"\n', '\\\\\\"\\n'),  # a backslash before a quote stays two characters, not an escaped quote
])
def test_escape(raw, escaped):
    assert escape(raw) == escaped


def test_a_value_with_quotes_and_newlines_stays_inside_its_string():
    text = selector("vllm:num_requests_running", [Matcher("model_name", "=", 'evil"} or up{x="\nmore')])
    assert text == 'vllm:num_requests_running{model_name="evil\\"} or up{x=\\"\\nmore"}'
    # One string literal: every quote inside is escaped, so the selector closes once, at the end.
    assert text.count('"') - text.count('\\"') == 2 and text.endswith('"}')


@pytest.mark.parametrize(("text", "label", "op", "value"), [
    ("role=decode", "role", "=", "decode"),
    ("job!=test", "job", "!=", "test"),
    ('model_name=~"llama.*"', "model_name", "=~", "llama.*"),
    ("cluster!~eu-.*", "cluster", "!~", "eu-.*"),
    ("note=a=b", "note", "=", "a=b"),
])
def test_parse_matcher(text, label, op, value):
    assert parse_matcher(text) == Matcher(label, op, value)


@pytest.mark.parametrize("text", ["novalue", "9job=x", 'a"b=c', "=x"])
def test_parse_matcher_refuses_what_is_not_a_matcher(text):
    with pytest.raises(ValueError):
        parse_matcher(text)


M = [Matcher("job", "=", "vllm")]


@pytest.mark.parametrize(("query", "expected"), [
    (promql.gauge_query("vllm:num_requests_running", M), 'sum by (job, instance) (vllm:num_requests_running{job="vllm"})'),
    (promql.gauge_query("vllm:kv_cache_usage_perc", fraction=True), "avg by (job, instance) (vllm:kv_cache_usage_perc)"),
    (promql.by_label_query("vllm:num_requests_waiting_by_reason", "reason"),
     "sum by (job, instance, reason) (vllm:num_requests_waiting_by_reason)"),
    (promql.rate_query("vllm:generation_tokens_total", M),
     'sum by (job, instance) (rate(vllm:generation_tokens_total{job="vllm"}[1m]))'),
    (promql.quantile_query(0.99, "vllm:time_to_first_token_seconds", M),
     'histogram_quantile(0.99, sum by (job, instance, le) (rate(vllm:time_to_first_token_seconds_bucket{job="vllm"}[1m])))'),
    (promql.quantile_query(0.99, "vllm:inter_token_latency_seconds", by=()),
     "histogram_quantile(0.99, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket[1m])))"),
    (promql.mean_query("vllm:inter_token_latency_seconds", window="30s"),
     "sum by (job, instance) (rate(vllm:inter_token_latency_seconds_sum[30s])) / "
     "sum by (job, instance) (rate(vllm:inter_token_latency_seconds_count[30s]))"),
    (promql.source_rate_query("vllm:prompt_tokens_by_source_total", "source", "external_kv_transfer"),
     'sum by (job, instance) (rate(vllm:prompt_tokens_by_source_total{source="external_kv_transfer"}[1m]))'),
    (promql.changes_query("process_start_time_seconds", lookback="10m"),
     "max by (job, instance) (changes(process_start_time_seconds[10m]))"),
    (promql.max_query("up", M), 'max by (job, instance) (up{job="vllm"})'),
])
def test_queries(query, expected):
    assert query == expected


def test_families_match_names_every_family_once():
    match = promql.families_match(["vllm:num_requests_running", "sglang:num_running_reqs", "vllm:num_requests_running"], M)
    assert match == '{__name__=~"sglang:num_running_reqs|vllm:num_requests_running",job="vllm"}'
    names = family_names()
    assert "vllm:num_requests_running" in names and "llamacpp:requests_processing" in names and "tgi_queue_size" in names
    assert "vllm:time_to_first_token_seconds_count" in names and len(names) == len(set(names))


@pytest.mark.parametrize(("seconds", "text"), [(60, "1m"), (600, "10m"), (90, "90s"), (0.2, "1s")])
def test_duration(seconds, text):
    assert promql.duration(seconds) == text


def test_plan_asks_only_for_the_names_instances_would_use():
    old_vllm = Discovered("a", "h:1", frozenset({"vllm:gpu_cache_usage_perc", "vllm:num_requests_running",
                                                 "vllm:time_per_output_token_seconds_count"}))
    new_vllm = Discovered("a", "h:2", frozenset({"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
                                                 "vllm:inter_token_latency_seconds_count"}))
    wants = plan([old_vllm, new_vllm])
    kv = {w.name for w in wants if w.field == "kv_cache_usage"}
    assert kv == {"vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"}  # each instance's first choice, once
    itl = {w.name for w in wants if w.field == "itl_s" and w.kind == "p99"}
    assert itl == {"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"}
    assert not any(w.name.startswith("sglang:") for w in wants)
    assert wants[Want("dcgm", "dram_active", "DCGM_FI_PROF_DRAM_ACTIVE")] == "DCGM_FI_PROF_DRAM_ACTIVE"


def test_an_instances_series_read_back_as_its_exposition_text():
    from tui.core.telemetry.metric_names import parse_exposition, read_scrape
    from tui.core.fleet.promql import exposition

    series = [({"__name__": "vllm:num_requests_running", "model_name": 'a"b\nc', "job": "vllm", "instance": "h:1"}, 3.0),
              ({"__name__": "vllm:time_to_first_token_seconds_bucket", "le": "0.1"}, 4.0),
              ({"__name__": "vllm:time_to_first_token_seconds_bucket", "le": "+Inf"}, 5.0),
              ({"__name__": "vllm:time_to_first_token_seconds_count"}, 5.0),
              ({"__name__": "vllm:generation_tokens_total"}, float("nan")),
              ({"job": "no name"}, 1.0)]
    text = exposition(series)
    parsed = parse_exposition(text)
    assert parsed["vllm:num_requests_running"] == [({"model_name": 'a"b\nc', "job": "vllm", "instance": "h:1"}, 3.0)]
    assert len(text.splitlines()) == 5, "a sample with no name is left out"
    reading = read_scrape(text, 10.0, 10.0)
    assert reading.gauges["running"] == 3.0 and reading.histograms["ttft_s"].count == 5.0
