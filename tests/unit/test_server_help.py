"""What a server's own --help says, read from real help texts (excerpts under tests/fixtures/help): flag names
for completion, and each flag's default, so the flag editor can show what a command changes from them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tui.core.serving.serve_command import ServeCommand
from tui.core.serving.server_help import (
    against_defaults,
    complete_flag,
    defaults_in_help,
    flags_in_help,
    help_argv,
    unfinished_flag,
    value_flags_in_help,
)

HELP = Path(__file__).parent.parent / "fixtures" / "help"


def test_flag_names_come_from_the_servers_own_help_and_complete_the_last_word():
    assert help_argv(ServeCommand.parse("python -m tui sim --port 8001")) == ["python", "-m", "tui", "sim", "--help"]
    assert help_argv(ServeCommand.parse("vllm serve m --max-num-seqs 8")) == ["vllm", "serve", "m", "--help=all"]
    text = """options:
  --max-num-batched-tokens N   token budget (default 2048; see --max-model-len)
  --enable-prefix-caching, --no-enable-prefix-caching
  --max-num-seqs MAX_NUM_SEQS  e.g. --max-num-seqs=256"""
    flags = flags_in_help(text)
    assert flags == ["--max-num-batched-tokens", "--max-model-len", "--enable-prefix-caching",
                     "--no-enable-prefix-caching", "--max-num-seqs"]
    assert complete_flag("vllm serve m --max-num-b", flags) == "vllm serve m --max-num-batched-tokens"
    assert complete_flag("vllm serve m --max-num-seqs", flags) is None, "already whole"
    assert complete_flag("vllm serve m 25", flags) is None and complete_flag("vllm serve m --zz", flags) is None


def test_vllm_defaults_come_from_help_all_and_none_is_the_servers_choice():
    defaults = defaults_in_help((HELP / "vllm-0.32-help-all.txt").read_text())
    assert defaults["gpu_memory_utilization"] == "0.92", "the last (default: …) of the entry, not its prose"
    assert defaults["device_memory_utilization"] == "0.92", "an alias shares its entry's default"
    assert defaults["enforce_eager"] == "False" and defaults["port"] == "8000"
    assert defaults["max_num_batched_tokens"] == "None", "a default stated after wrapped examples"
    command = ServeCommand.parse("vllm serve m --max-num-batched-tokens 512 --gpu-memory-utilization 0.92 "
                                 "--no-enforce-eager --api-key sk-not-shown --port 8001")
    flags = {f.name: f for f in against_defaults(command, defaults)}
    assert set(flags) == {"max-num-batched-tokens", "gpu-memory-utilization", "enforce-eager"}, "no key, no port"
    assert flags["max-num-batched-tokens"].differs is None and str(flags["max-num-batched-tokens"]) == \
        "--max-num-batched-tokens 512 (default: the server's choice)"
    assert not flags["gpu-memory-utilization"].differs, "0.92 is the default"
    assert not flags["enforce-eager"].differs and str(flags["enforce-eager"]) == "--no-enforce-eager (default False)"


def test_llama_server_defaults_are_read_from_its_one_line_entries():
    defaults = defaults_in_help((HELP / "llama-server-help.txt").read_text())
    assert (defaults["batch_size"], defaults["ubatch_size"], defaults["parallel"]) == ("2048", "512", "-1")
    assert defaults["flash_attn"] == "auto", "'default: x' inside a list of choices"
    assert defaults["cont_batching"] == "enabled", "a default on the entry's next lines"
    assert defaults["threads_batch"] == "same as --threads", "a default wrapped onto the next line"
    command = ServeCommand.parse("llama-server -m model.gguf --batch-size 2048 --parallel 4 --cont-batching --ctx-size 4096")
    differs = {f.name: f.differs for f in against_defaults(command, defaults)}
    assert differs == {"batch-size": False, "parallel": True, "cont-batching": False, "ctx-size": True}


def test_the_simulators_own_help_states_its_defaults():
    text = subprocess.run([sys.executable, "-m", "tui", "sim", "--help"], capture_output=True, text=True, check=True).stdout
    defaults = defaults_in_help(text)
    assert defaults["max_num_batched_tokens"] == "2048" and defaults["max_num_seqs"] == "256"
    command = ServeCommand.parse("phasetop sim --max-num-batched-tokens 256 --enable-prefix-caching --max-num-seqs 256 --model x")
    shown = {f.name: (f.differs, str(f)) for f in against_defaults(command, defaults)}
    assert shown["max-num-batched-tokens"] == (True, "--max-num-batched-tokens 256 (default 2048)")
    assert shown["enable-prefix-caching"] == (False, "--enable-prefix-caching (default on)")
    assert shown["max-num-seqs"][0] is False and shown["model"][0] is True
    # "(default: settings, else 'H100 SXM'; …)": with no settings file, the preset after "else"
    assert defaults["gpu"] == "H100 SXM"


def test_a_help_without_defaults_gives_none_and_no_flag_is_called_changed_from_what_it_does_not_state():
    assert defaults_in_help("usage: x [--a A]\n  --a A  the a\n") == {}
    flag, = against_defaults(ServeCommand.parse("x --a 1"), {})
    assert flag.differs is None and str(flag) == "--a 1 (no default in --help)"


def test_a_flag_half_typed_or_given_no_value_yet_is_unfinished_and_a_switch_or_a_typo_is_not():
    """The flag editor counts no change for the flag being typed at the end of the command (it showed
    `--max-num-batched-tokens (none) → True`), from the help's own shapes: vLLM's, llama.cpp's."""
    for name, value_flag, switch in (("vllm-0.32-help-all.txt", "--max-num-batched-tokens", "--enforce-eager"),
                                     ("llama-server-help.txt", "--batch-size", "--cont-batching")):
        text = (HELP / name).read_text()
        flags, takes_value = flags_in_help(text), value_flags_in_help(text)
        assert value_flag in takes_value and switch not in takes_value, name
        assert unfinished_flag(f"serve m {value_flag[:7]}", flags, takes_value) == value_flag[:7], "half a name"
        assert unfinished_flag(f"serve m {value_flag}", flags, takes_value) == value_flag, "no value yet"
        assert unfinished_flag(f"serve m {value_flag} ", flags, takes_value) == value_flag, "a space, still no value"
        assert unfinished_flag(f"serve m {value_flag} 512", flags, takes_value) is None
        assert unfinished_flag(f"serve m {value_flag}=512", flags, takes_value) is None
        assert unfinished_flag(f"serve m {switch}", flags, takes_value) is None, "a whole switch is a change"
        assert unfinished_flag("serve m --zz-typo", flags, takes_value) is None, "no flag begins so: the server's to refuse"
    assert "--flash-attn" not in value_flags_in_help((HELP / "llama-server-help.txt").read_text()), \
        "`--flash-attn [on|off|auto]`: its value is optional"
    assert unfinished_flag("serve m --max-num-b", [], set()) is None, "the help not read yet: nothing to tell by"

