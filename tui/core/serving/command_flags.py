"""A local server's flags, read from its command line: what a restart changed that /metrics does not say.

vLLM publishes its cache config (`vllm:cache_config_info`) but not its scheduler's, so a restart with
`--max-num-batched-tokens 512` shows in no metric; the process's own argv does. Secrets on the command
line (`--api-key sk-…`) are dropped here, before anything can save or show them.
"""

from __future__ import annotations

from collections.abc import Sequence

SECRET_WORDS = {"key", "token", "secret", "password", "auth"}
"""A flag whose name has one of these words (`--api-key`, `--hf-token`) carries a credential: never kept.
Whole words: `--max-num-batched-tokens` is a setting."""
NOT_CONFIG = {"host", "port", "stop_on_stdin_close"}
"""Where it listens, and phasetop's own launcher argument (the simulator ends with its parent): not how it serves."""


def command_flags(argv: Sequence[str]) -> dict[str, str]:
    """`--name value`, `--name=value` and bare `--flag` (True) / `--no-flag` (False), names with underscores.

    Positional words (the program, a model given as `vllm serve MODEL`) are skipped; the last value of a
    repeated flag wins, as argparse takes it.
    """
    flags: dict[str, str] = {}
    words = list(argv)
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if not word.startswith("--") or word == "--":
            continue
        name, has_value, value = word[2:].partition("=")
        if not has_value:
            if index < len(words) and not words[index].startswith("--"):
                value = words[index]
                index += 1
            elif name.startswith("no-"):
                name, value = name[3:], "False"
            else:
                value = "True"
        key = name.replace("-", "_")
        if key in NOT_CONFIG or SECRET_WORDS & set(key.lower().split("_")):
            continue
        flags[key] = value
    return flags
