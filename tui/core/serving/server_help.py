"""What a server's own `--help` says: its flag names (for completion) and their defaults (to show what a
command changes from them).

Three shapes are read: argparse's (vLLM: `  --flag ARG, --alias ARG` then the text, ending in
"(default: X)"; the simulator: "(default X; …)"), and llama.cpp's (`-b,    --batch-size N   text (default:
2048)` on one line, continued below). vLLM lists its flags' texts only under `--help=all`, and many of its
defaults there are `None`: the value is then chosen when the server starts, so whether a value given differs
cannot be told."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tui.core.serving.command_flags import command_flags
from tui.core.serving.serve_command import OFF, ON, ServeCommand

_HELP_FLAG = re.compile(r"(?<![\w-])--([a-z0-9][a-z0-9-]*[a-z0-9])")
_ENTRY = re.compile(r"^\s{0,4}--?[A-Za-z]")
"""A line that starts a flag's entry (its text is indented further, or follows on the same line)."""
_PAREN_DEFAULT = re.compile(r"[(;,]\s*default:?\s+([^;,)]*?)\s*[;,)]")
"""`(default X)`, `(…; default X)`, `(…, default: X)`: a default in its own clause, not prose
("will use the default value of 0.92")."""
_VALUE_AFTER = re.compile(r"--([a-z0-9][a-z0-9-]*[a-z0-9])[ =][^\s,[-]")
"""In an entry's names, a flag followed by its metavar (`--port P`, `--quantization {none,fp8}`; not an optional one,
`--flash-attn [on|off|auto]`)."""
_COLON_DEFAULT = re.compile(r"\bdefault:\s+([^;,)]*?)\s*[;,)]")
_SETTINGS_DEFAULT = re.compile(r"\bdefault:\s+settings\b[^;,)]*,\s*else\s+([^;,)]*?)\s*[;,)]")
"""phasetop's own `(default: settings, else 'H100 SXM'; …)`: the default with no settings file is after "else"."""
UNSET = ("none", "unset", "null")
"""Defaults that mean the server decides at start-up."""
ENABLED = ("enabled", *ON)
DISABLED = ("disabled", *OFF)


def help_argv(command: ServeCommand) -> list[str]:
    """The command that prints the server's flags: its words before the first `--option`, then `--help`
    (`vllm serve MODEL --help=all`, `python -m tui sim --help`, `llama-server -m model.gguf --help`).
    vLLM's plain `--help` lists names only; `--help=all` has each flag's text and default."""
    head = []
    for word in command.argv:
        if word.startswith("--"):
            break
        head.append(word)
    return [*head, "--help=all" if command.engine == "vllm" else "--help"]


def flags_in_help(text: str) -> list[str]:
    """The `--flag` names a server's `--help` lists, each once, in the order it lists them (`--no-x` too)."""
    return list(dict.fromkeys(f"--{name}" for name in _HELP_FLAG.findall(text)))


def value_flags_in_help(text: str) -> set[str]:
    """The `--flag` names whose entry shows a value after the name (`--max-num-batched-tokens N`, `-b, --batch-size N`,
    `--quantization {none,fp8}`): a flag that is no switch, so given bare it is not whole yet."""
    return {f"--{name}" for definition, _ in _entries(text) for name in _VALUE_AFTER.findall(definition)}


def unfinished_flag(text: str, flags: Sequence[str], value_flags: set[str]) -> str | None:
    """The flag being typed at the end of `text`, not yet a change: a word that begins one of the help's flags but is
    none of them (`--max-num-b`), or a flag that takes a value given none yet (`--max-num-batched-tokens`). None when
    the help's flags are not known, or the command ends in a whole switch, a value, or a word no flag begins (a
    typo, the server's to refuse)."""
    words = text.split()
    last = words[-1] if words and flags else ""
    if not last.startswith("--") or "=" in last:
        return None
    if last in flags:
        return last if last in value_flags else None
    return last if any(flag.startswith(last) for flag in flags) else None


def complete_flag(value: str, flags: Sequence[str]) -> str | None:
    """`value` with its last word completed to the first flag it begins (`… --max-num-b` → `… --max-num-batched-tokens`);
    None when the last word is no flag's beginning, or a whole flag already."""
    head, _, last = value.rpartition(" ")
    if not last.startswith("--"):
        return None
    match = next((flag for flag in flags if flag.startswith(last) and flag != last), None)
    return f"{head} {match}".lstrip() if match and head else match


def defaults_in_help(text: str) -> dict[str, str]:
    """Each flag's default as its entry states it, by name with underscores (as `command_flags` reads a
    command): `--batch-size N … (default: 2048)` → {"batch_size": "2048"}. Aliases share their entry's default;
    a `--no-x` form gives x's. A flag whose entry states none is absent."""
    defaults: dict[str, str] = {}
    for definition, entry in _entries(text):
        found = _SETTINGS_DEFAULT.findall(entry) or _PAREN_DEFAULT.findall(entry) or _COLON_DEFAULT.findall(entry)
        if not found:
            continue
        default = found[-1].strip().strip("'\"")  # vLLM ends its text with the default; "the default value of" before it is prose
        for name in _HELP_FLAG.findall(definition):
            defaults.setdefault(name.removeprefix("no-").replace("-", "_"), default)
    return defaults


def _entries(text: str) -> list[tuple[str, str]]:
    """The help's flag entries: (the names with their metavars, the whole entry as one line). The names end at
    the first run of two spaces after the first `--name` (`-b,    --batch-size N      logical …`)."""
    entries: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if _ENTRY.match(line):
            first = _HELP_FLAG.search(line)
            end = line.find("  ", first.end()) if first else -1
            entries.append((line if end < 0 else line[:end], [line.strip()]))
        elif entries and line.strip():
            entries[-1][1].append(line.strip())
    return [(definition, " ".join(lines)) for definition, lines in entries]


@dataclass(frozen=True, slots=True)
class FlagAgainstDefault:
    """One flag of a command beside the default its server's help states."""

    name: str
    """As written on the command line, without dashes (`max-num-batched-tokens`)."""
    value: str
    default: str | None
    """None: the help states no default for it."""

    @property
    def differs(self) -> bool | None:
        """Whether the value is not the stated default; None where that cannot be told: the help states no default,
        or one the server chooses at start (vLLM's None), which may be the very value given."""
        if self.default is None or self.default.strip().lower() in UNSET:
            return None
        return _normal(self.value) != _normal(self.default)

    def __str__(self) -> str:
        given = {"True": f"--{self.name}", "False": f"--no-{self.name}"}.get(self.value, f"--{self.name} {self.value}")
        if self.default is None:
            return f"{given} (no default in --help)"
        if self.default.lower() in UNSET:
            return f"{given} (default: the server's choice)"
        return f"{given} (default {self.default})"


def against_defaults(command: ServeCommand, defaults: dict[str, str]) -> list[FlagAgainstDefault]:
    """Each flag the command gives (no credential, not where it listens), beside its stated default."""
    return [FlagAgainstDefault(name.replace("_", "-"), value, defaults.get(name))
            for name, value in command_flags(command.argv).items()]


def _normal(value: str) -> str:
    """A value as comparable text: on/off words, numbers (2048 = 2048.0), case."""
    lowered = value.strip().strip("'\"").lower()
    if lowered in ENABLED:
        return "on"
    if lowered in DISABLED:
        return "off"
    try:
        return repr(float(lowered))
    except ValueError:
        return lowered
