"""Run files on disk: one `<id>.json` per run, written atomically, found by id, id prefix or path.

A save writes a hidden temp file in the same directory, fsyncs it, then `os.replace`s it over the
target, so a reader (or a crash at any moment) sees the old file whole or the new one whole.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from pathlib import Path

from platformdirs import user_data_dir

from tui.core.runs import SCHEMA, run_header

TEMP_SUFFIX = ".tmp"
STALE_TEMP_S = 600.0
"""A temp file this old was left by a save that was killed; the next save removes it."""


class RunStoreError(Exception):
    """A run could not be found or read; the message is one line for a person."""


class RunNotFound(RunStoreError):
    """No run, or more than one, matches the id, prefix or path given."""


class RunFileError(RunStoreError):
    """The file exists but is not a readable phasetop run."""


def default_runs_dir(chosen: str | None = None) -> Path:
    """The directory chosen (a flag or the runs_dir setting), else `runs` in the user data dir
    (e.g. ~/.local/share/phasetop/runs)."""
    return Path(chosen).expanduser() if chosen else Path(user_data_dir("phasetop")) / "runs"


def save_run(run: dict, directory: Path, secret: str | None = None) -> Path:
    """Write the run as `<directory>/<id>.json` atomically and return its path.

    With `secret` (the API key), a run whose text would contain it is refused (ValueError), never
    written. Raises OSError when the directory cannot be written.
    """
    text = json.dumps(_finite(run), indent=1, allow_nan=False) + "\n"
    if secret and (secret in text or json.dumps(secret)[1:-1] in text):
        raise ValueError("the run would contain the API key")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(directory)
    return write_atomic(directory / f"{run['id']}.json", text)


def write_atomic(path: Path, text: str) -> Path:
    """Write text to path so that any reader, or a crash at any moment, sees the old file whole or the new one whole.

    A hidden temp file beside the target, fsync, `os.replace`, then fsync of the directory.
    Raises OSError.
    """
    path = Path(path)
    directory = path.parent
    fd, temp = tempfile.mkstemp(dir=directory, prefix=f".{path.stem}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    _fsync_dir(directory)
    return path


def list_runs(directory: Path) -> list[dict]:
    """Headers (`run_header` plus `path`) of the runs in the directory, oldest first; unreadable files are skipped."""
    headers = []
    for path in _run_files(Path(directory)):
        try:
            run = _read(path)
        except RunFileError:
            continue
        headers.append({**run_header(run), "path": str(path)})
    return sorted(headers, key=lambda header: (str(header["id"]), header["path"]))


def load_run(ref: str, directory: Path) -> dict:
    """The run named by `ref`: a file path, an id, or a prefix of exactly one id in the directory."""
    path = Path(ref).expanduser()
    if path.suffix == ".json" or os.sep in ref or (os.altsep and os.altsep in ref):
        if not path.is_file():
            raise RunNotFound(f"no run file {ref}")
        return _read(path)
    directory = Path(directory)
    exact = directory / f"{ref}.json"
    if exact.is_file():
        return _read(exact)
    matches = [p for p in _run_files(directory) if p.stem.startswith(ref)] if ref else []
    if not matches:
        raise RunNotFound(f"no run {ref!r} in {directory} (`phasetop runs` lists them)")
    if len(matches) > 1:
        names = ", ".join(p.stem for p in matches[:3]) + (", …" if len(matches) > 3 else "")
        raise RunNotFound(f"{ref!r} matches {len(matches)} runs ({names}): give more of the id")
    return _read(matches[0])


def _finite(value: object) -> object:
    """JSON has no inf or NaN: they are kept as the strings "inf", "-inf", "nan" (a request rate may be inf)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _run_files(directory: Path) -> list[Path]:
    """Run files only: temp files are hidden (leading dot) and end in .tmp."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("*.json") if not p.name.startswith(".") and p.is_file())


def _read(path: Path) -> dict:
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise RunFileError(f"cannot read run file {path}: {error}") from None
    if not isinstance(run, dict) or run.get("schema") != SCHEMA or not isinstance(run.get("id"), str):
        raise RunFileError(f"{path} is not a phasetop run file (schema {SCHEMA})")
    return run


def _remove_stale_temps(directory: Path) -> None:
    cutoff = time.time() - STALE_TEMP_S
    for temp in directory.glob(f".*{TEMP_SUFFIX}"):
        try:
            if temp.stat().st_mtime < cutoff:
                temp.unlink()
        except OSError:
            pass  # another save removed it, or it is not ours to remove


def _fsync_dir(directory: Path) -> None:
    """Make the rename itself durable (POSIX); Windows cannot open a directory, and needs nothing."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
