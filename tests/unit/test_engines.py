"""The engine adapters: each engine's knowledge in its own file, read across them by field, command and name."""

from __future__ import annotations

import pytest

from tui.core.engines.known import (COMMAND_ORDER, ENGINES, METRIC_ENGINES, PHASETOP, merged, metrics_hint,
                                    named, of_command, of_metric, titles)
from tui.core.serving.serve_command import UNKNOWN_ENGINES_PORT, ServeCommand
from tui.core.telemetry.metric_names import COUNTERS, GAUGES, HISTOGRAMS, read_scrape
from tui.core.view.diagnosis import knobs_for


@pytest.mark.parametrize("engine", METRIC_ENGINES, ids=lambda e: e.name)
def test_every_metric_name_of_an_adapter_is_its_own_engines(engine):
    tables = (engine.gauges, engine.counters, engine.histograms)
    names = [name for table in tables for names in table.values() for name in names]
    names += [raw for raw, _, _ in (*engine.labelled_gauges.values(), *engine.labelled_counters.values())]
    names += [*engine.config_info, *engine.config_gauges]
    assert names and all(name.startswith(engine.metric_prefix) for name in names), names
    assert of_metric(names) is engine


def test_a_fields_names_run_over_the_engines_in_order_newer_names_first():
    assert GAUGES["kv_cache_usage"][:2] == ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    assert [of_metric([name]).name for name in HISTOGRAMS["itl_s"]] == ["vllm", "vllm", "sglang", "tgi"]
    assert COUNTERS["prefix_cache_hits_total"][-1] == "llamacpp:prompt_tokens_cached_total"
    assert merged("gauges") == GAUGES and set(GAUGES) >= {"running", "waiting", "kv_cache_usage", "prefix_cache_hit_rate"}


@pytest.mark.parametrize(("command", "engine", "port"), [
    ("vllm serve Qwen/Qwen3-0.6B", "vllm", 8000),
    ("python -m vllm.entrypoints.openai.api_server --model m", "vllm", 8000),
    ("python -m sglang.launch_server --model-path m", "sglang", 30000),
    ("llama-server -m model.gguf", "llamacpp", 8080),
    ("phasetop sim --max-num-seqs 8", "phasetop", 8000),
    ("python -m tui sim", "phasetop", 8000),
    ("my-server --model m", "unknown", UNKNOWN_ENGINES_PORT),
])
def test_a_command_is_read_as_its_engine_and_listens_on_its_port(command, engine, port):
    served = ServeCommand.parse(command)
    assert served.engine == engine and served.port == port
    assert ServeCommand.parse(f"{command} --port 9123").port == 9123


def test_an_engine_is_found_by_its_name_and_its_scrape():
    assert named("sglang").title == "SGLang" and named("phasetop") is PHASETOP and named("nope") is None
    assert of_command("llama-cpp-server") is named("llamacpp") and PHASETOP in COMMAND_ORDER
    reading = read_scrape("sglang:num_running_reqs 3\nsglang:token_usage 0.5\n", 0.0, 0.0)
    assert reading.engine == "sglang" and reading.gauges["running"] == 3


def test_the_words_for_a_person_come_from_every_adapter():
    assert titles() == "vLLM, SGLang, llama.cpp or TGI"
    hint = metrics_hint()
    assert hint.startswith("Ollama has none") and all(e.metrics_on in hint for e in METRIC_ENGINES if e.metrics_on)
    assert knobs_for("sglang").prefill_batch == "--chunked-prefill-size" and knobs_for("openai") == named("vllm").knobs
    assert {e.name for e in ENGINES if e.knobs} == {"vllm", "sglang", "llamacpp", "ollama"}
