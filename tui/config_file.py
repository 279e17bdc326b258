"""Writing one top-level setting back into the user's TOML config file, every other byte left as it was."""

from __future__ import annotations

import json
import os
import re
import tempfile
import tomllib
from pathlib import Path

_TABLE = re.compile(r"\s*\[")
NEW_FILE_MODE = 0o600
"""A config file this creates: the user's alone, as it may later hold an API key."""


def remember_setting(path: Path, key: str, value: str) -> None:
    """Set the top-level `key = "value"` in the TOML file at `path`, creating it (with only that line) if missing.

    The key's line before the first table is replaced, or a line added before that table; nothing else is
    written, so comments and whatever else the user keeps there stay as they were. The new text must read back
    as the old settings with only `key` changed, else ValueError (a file that is not TOML; the key inside a
    multi-line string) and the file is untouched. The write is atomic (a temp file beside it, renamed over
    it) and keeps the file's mode; a symlinked file is written where it points. OSError when it cannot be.
    """
    path = path.expanduser().resolve()
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    before = tomllib.loads(text)  # a TOMLDecodeError is a ValueError
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    line = f"{key} = {json.dumps(value)}\n"
    first_table = next((i for i, text_line in enumerate(lines) if _TABLE.match(text_line)), len(lines))
    own = re.compile(rf"\s*{re.escape(key)}\s*=")
    at = next((i for i in range(first_table) if own.match(lines[i])), None)
    if at is not None:
        lines[at] = line
    else:
        lines.insert(first_table, line if first_table == len(lines) else line + "\n")
    new_text = "".join(lines)
    if tomllib.loads(new_text) != {**before, key: value}:
        raise ValueError(f"{path}: {key} is set where it cannot be rewritten safely; set it by hand")
    _replace(path, new_text)


def _replace(path: Path, text: str) -> None:
    mode = path.stat().st_mode & 0o777 if path.exists() else NEW_FILE_MODE
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
