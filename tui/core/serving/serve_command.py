"""A server's command line as phasetop runs it: where it will listen, and the same command with one flag changed.

Any server command (`vllm serve …`, `python -m vllm.entrypoints.openai.api_server …`, `llama-server …`,
`python -m sglang.launch_server …`, `phasetop sim …`): flags are read and changed by name, so the tuning loop
can say `--max-num-batched-tokens=256` or `enable-prefix-caching=off` without knowing the server."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from tui.core.engines.known import named, of_command
from tui.core.serving.command_flags import SECRET_WORDS, command_flags
from tui.core.untrusted import register_secret

UNKNOWN_ENGINES_PORT = 8000
"""Where a server whose command is not recognised is looked for when it names no port: vLLM's, the reference's."""
MASK = "***"
"""What a credential on the command line is shown as (the flag editor puts it back on Enter)."""
ON = ("on", "true", "yes")
OFF = ("off", "false", "no")
"""Values of a boolean flag: on writes `--name`, off `--no-name` (argparse's and vLLM's form)."""


class CommandError(ValueError):
    """A command or a flag setting that cannot be used; the message is one line."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One flag set to one value: `max-num-batched-tokens=256`."""

    flag: str
    """The flag's name without dashes."""
    value: str

    @classmethod
    def parse(cls, text: str) -> Setting:
        name, sep, value = text.partition("=")
        name = name.strip().lstrip("-")
        if not sep or not name or not value.strip():
            raise CommandError(f"{text!r} is not FLAG=VALUE (e.g. max-num-batched-tokens=256)")
        return cls(name, value.strip())

    def __str__(self) -> str:
        return f"{self.flag}={self.value}"


@dataclass(frozen=True, slots=True)
class ServeCommand:
    """A server's argv."""

    argv: tuple[str, ...]

    @classmethod
    def parse(cls, text: str | Sequence[str]) -> ServeCommand:
        """From one shell-quoted string, or an argv already split."""
        try:
            argv = tuple(shlex.split(text)) if isinstance(text, str) else tuple(text)
        except ValueError as error:
            raise CommandError(f"cannot read the server command: {error}") from None
        if not argv:
            raise CommandError("the server command is empty")
        command = cls(argv)
        for _, value in command.secrets():
            register_secret(value)  # an --api-key given to the server is redacted wherever it could show
        return command

    def secrets(self) -> list[tuple[int, str]]:
        """(argv index, value) of each credential flag's value (`--api-key K`, `--hf-token=T`)."""
        found = []
        for i, word in enumerate(self.argv):
            name, sep, value = word.removeprefix("--").partition("=")
            if not word.startswith("--") or not SECRET_WORDS & set(name.replace("-", "_").lower().split("_")):
                continue
            if sep:
                found.append((i, value))
            elif i + 1 < len(self.argv):
                found.append((i + 1, self.argv[i + 1]))
        return [(i, value) for i, value in found if value]

    def shown(self) -> str:
        """The command for a person to read and edit: each credential's value as `MASK`."""
        argv = list(self.argv)
        for i, value in self.secrets():
            argv[i] = argv[i].replace(value, MASK) if argv[i] != value else MASK
        return shlex.join(argv)

    def with_secrets_from(self, original: ServeCommand) -> ServeCommand:
        """This command (edited from `original.shown()`) with each `MASK` put back as the credential it hid."""
        hidden = iter(value for _, value in original.secrets())
        argv = [word.replace(MASK, next(hidden, MASK)) if MASK in word else word for word in self.argv]
        return ServeCommand(tuple(argv))

    def __str__(self) -> str:
        return shlex.join(self.argv)

    @property
    def engine(self) -> str:
        """"vllm", "sglang", "llamacpp", "phasetop", or "unknown": from the program and module names."""
        engine = of_command(" ".join(self.argv[:4]).lower())
        return engine.name if engine else "unknown"

    def value(self, flag: str) -> str | None:
        """The value of `--flag V` or `--flag=V` (the last one given), else None."""
        found = None
        for i, word in enumerate(self.argv):
            if word == f"--{flag}" and i + 1 < len(self.argv):
                found = self.argv[i + 1]
            elif word.startswith(f"--{flag}="):
                found = word.split("=", 1)[1]
        return found

    @property
    def port(self) -> int:
        """The port it will listen on: `--port`, else its engine's default (8000, vLLM's, for one not recognised)."""
        given = self.value("port")
        if given is None:
            engine = named(self.engine)
            return engine.default_port if engine and engine.default_port else UNKNOWN_ENGINES_PORT
        try:
            port = int(given)
        except ValueError:
            raise CommandError(f"--port {given!r} is not a port number") from None
        if not 1 <= port <= 65535:
            raise CommandError(f"--port {port} is not a port phasetop can wait on (1–65535)")
        return port

    @property
    def host(self) -> str:
        """The address to reach it on: `--host`, with a wildcard read as loopback."""
        host = self.value("host") or "127.0.0.1"
        return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def with_setting(self, setting: Setting) -> ServeCommand:
        """The command with `setting` in place of the flag's current value (in either form, or its `--no-`
        form), or added at the end. A boolean value (on/off) writes `--flag` or `--no-flag`."""
        argv, i = [], 0
        names = {f"--{setting.flag}", f"--no-{setting.flag}"}
        while i < len(self.argv):
            word = self.argv[i]
            if word in names:
                takes_value = word == f"--{setting.flag}" and i + 1 < len(self.argv) and not self.argv[i + 1].startswith("--")
                i += 2 if takes_value else 1
                continue
            if any(word.startswith(f"{name}=") for name in names):
                i += 1
                continue
            argv.append(word)
            i += 1
        lowered = setting.value.lower()
        if lowered in ON:
            argv.append(f"--{setting.flag}")
        elif lowered in OFF:
            argv.append(f"--no-{setting.flag}")
        else:
            argv += [f"--{setting.flag}", setting.value]
        return ServeCommand(tuple(argv))


def grid(varied: Sequence[tuple[str, Sequence[str]]]) -> list[tuple[Setting, ...]]:
    """Every combination of the varied flags' values, the first flag's values outermost:
    [("a", ["1", "2"]), ("b", ["x", "y"])] → a=1 b=x, a=1 b=y, a=2 b=x, a=2 b=y."""
    points: list[tuple[Setting, ...]] = [()]
    for flag, values in varied:
        points = [(*point, Setting(flag, value)) for point in points for value in values]
    return points


def parse_vary(text: str) -> tuple[str, list[str]]:
    """`max-num-batched-tokens=256,512,2048` → ("max-num-batched-tokens", ["256", "512", "2048"])."""
    first = Setting.parse(text)
    values = [v.strip() for v in first.value.split(",")]
    if any(not v for v in values):
        raise CommandError(f"{text!r}: an empty value in the list")
    if len(set(values)) != len(values):
        raise CommandError(f"{text!r}: a value is listed twice")
    return first.flag, values


def changed_flags(before: ServeCommand, after: ServeCommand) -> list[str]:
    """Each flag whose value differs between two commands, as "--name before → after" ("(none)" where unset);
    read as `tui.core.serving.command_flags` reads a running server's (no credential, not where it listens)."""
    old, new = command_flags(before.argv), command_flags(after.argv)
    return [f"--{name.replace('_', '-')} {old.get(name, '(none)')} → {new.get(name, '(none)')}"
            for name in [*old, *(n for n in new if n not in old)] if old.get(name) != new.get(name)]
