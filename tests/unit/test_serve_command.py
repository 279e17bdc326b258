"""A server's command line: where it listens, one flag changed in any of its forms, the grid, and the best."""

from __future__ import annotations

import pytest

from tui.core.serving.serve_command import CommandError, ServeCommand, Setting, grid, parse_vary
from tui.core.serving.tune import OBJECTIVES, best


@pytest.mark.parametrize(("text", "engine", "url"), [
    ("vllm serve meta-llama/Llama-3.1-8B-Instruct", "vllm", "http://127.0.0.1:8000"),
    ("python -m vllm.entrypoints.openai.api_server --model m --port 9000 --host 0.0.0.0", "vllm", "http://127.0.0.1:9000"),
    ("llama-server -m model.gguf --port=8081", "llamacpp", "http://127.0.0.1:8081"),
    ("python -m sglang.launch_server --model-path m", "sglang", "http://127.0.0.1:30000"),
    ("phasetop sim --port 8123 --host ::1", "phasetop", "http://[::1]:8123"),
    ("/opt/bin/python -m tui sim", "phasetop", "http://127.0.0.1:8000"),
])
def test_the_engine_and_where_it_listens(text, engine, url):
    command = ServeCommand.parse(text)
    assert (command.engine, command.url) == (engine, url)


def test_a_setting_replaces_the_flag_in_any_form_or_is_added():
    command = ServeCommand.parse("vllm serve m --max-num-batched-tokens 2048 --port 8001")
    changed = command.with_setting(Setting("max-num-batched-tokens", "256"))
    assert changed.argv == ("vllm", "serve", "m", "--port", "8001", "--max-num-batched-tokens", "256")
    assert ServeCommand.parse("vllm serve m --max-num-batched-tokens=2048").with_setting(
        Setting("max-num-batched-tokens", "512")).value("max-num-batched-tokens") == "512"
    added = ServeCommand.parse("vllm serve m").with_setting(Setting("max-num-seqs", "64"))
    assert added.argv[-2:] == ("--max-num-seqs", "64") and command.argv[-1] == "8001", "the original is unchanged"


def test_a_boolean_setting_writes_the_flag_or_its_no_form():
    command = ServeCommand.parse("vllm serve m --no-enable-prefix-caching --port 8001")
    on = command.with_setting(Setting("enable-prefix-caching", "on"))
    assert on.argv == ("vllm", "serve", "m", "--port", "8001", "--enable-prefix-caching")
    off = on.with_setting(Setting("enable-prefix-caching", "off"))
    assert off.argv == ("vllm", "serve", "m", "--port", "8001", "--no-enable-prefix-caching")
    assert on.with_setting(Setting("parallel", "1")).argv[-2:] == ("--parallel", "1"), "a number is a value, not on"


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty"), ("vllm serve 'unclosed", "cannot read"), ("vllm serve --port http", "not a port number"),
    ("vllm serve --port 70000", "not a port phasetop can wait on"),
])
def test_commands_that_cannot_be_used_say_why(text, message):
    with pytest.raises(CommandError, match=message):
        ServeCommand.parse(text).url


def test_the_grid_is_every_combination_the_first_flag_outermost():
    points = grid([parse_vary("a=1,2"), parse_vary("--b=x,y")])
    assert [" ".join(map(str, p)) for p in points] == ["a=1 b=x", "a=1 b=y", "a=2 b=x", "a=2 b=y"]
    with pytest.raises(CommandError, match="empty value"):
        parse_vary("a=1,,2")


def figures(ttft_p99: float, itl_p99: float, tok_s: float) -> dict:
    return {"ttft_s": {"p99": ttft_p99}, "itl_s": {"p99": itl_p99}, "output_throughput": tok_s, "request_goodput": None}


def test_the_best_is_lowest_for_latency_highest_for_throughput_and_skips_failed_starts():
    rows = [None, figures(0.5, 0.020, 500.0), figures(0.4, 0.070, 580.0), figures(0.4, 0.020, 580.0)]
    assert best(rows, OBJECTIVES["itl-p99"]) == 1, "the first of equals"
    assert best(rows, OBJECTIVES["ttft-p99"]) == 2
    assert best(rows, OBJECTIVES["throughput"]) == 2
    assert best(rows, OBJECTIVES["goodput"]) is None, "no row has the figure"
    assert best([None, None], OBJECTIVES["itl-p99"]) is None


def test_the_flags_that_changed_between_two_commands():
    from tui.core.serving.serve_command import changed_flags

    first = ServeCommand.parse("vllm serve m --max-num-batched-tokens 2048 --enable-prefix-caching --port 8001")
    now = first.with_setting(Setting("max-num-batched-tokens", "256")).with_setting(Setting("enable-prefix-caching", "off"))
    now = now.with_setting(Setting("max-num-seqs", "64")).with_setting(Setting("port", "9000"))
    assert changed_flags(first, now) == ["--max-num-batched-tokens 2048 → 256", "--enable-prefix-caching True → False",
                                         "--max-num-seqs (none) → 64"], "where it listens is not a flag that changed"
    assert changed_flags(first, first) == []


def test_a_credential_on_the_command_line_is_masked_for_editing_and_put_back():
    from tui.core.untrusted import redact

    command = ServeCommand.parse("vllm serve m --api-key sk-serve-9f2a --hf-token=hf_xyz123456 --max-num-seqs 8")
    assert command.shown() == "vllm serve m --api-key '***' '--hf-token=***' --max-num-seqs 8"
    assert "sk-serve-9f2a" not in redact(f"the server said: {command}"), "registered as a secret when read"
    edited = ServeCommand.parse(command.shown()).with_setting(Setting("max-num-seqs", "16"))
    restored = edited.with_secrets_from(command)
    assert restored.value("api-key") == "sk-serve-9f2a" and restored.value("hf-token") == "hf_xyz123456"
    assert restored.value("max-num-seqs") == "16"
