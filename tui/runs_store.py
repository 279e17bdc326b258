"""Run files on disk: one `<id>.json` per run, written atomically, found by id, id prefix or path.

A save writes a hidden temp file in the same directory, fsyncs it, then `os.replace`s it over the
target, so a reader (or a crash at any moment) sees the old file whole or the new one whole. The temp
file's name holds the writer's pid, so the temps of a writer that was killed are removed by the next
save or listing, at once; one whose writer cannot be told is removed once it is STALE_TEMP_S old.

A file is read only once it passes the run schema (`tui.core.runs.schema`): a listing names each file it
cannot read, with the reason, and goes on with the others.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psutil
from platformdirs import user_data_dir

from tui.core.runs.schema import RunInvalid, check_run
from tui.core.runs.run_record import is_bench_document, run_from_bench_document, run_header
from tui.core.runs.sessions import read_as_ui_session
from tui.core.untrusted import redact_all, surrogates_escaped, without_credentials

TEMP_SUFFIX = ".tmp"
STALE_TEMP_S = 600.0
"""A temp file this old whose writer's pid is unknown (or is this process's) was left by a killed save."""


class RunStoreError(Exception):
    """A run could not be found or read; the message is one line for a person."""


class RunNotFound(RunStoreError):
    """No run, or more than one, matches the id, prefix or path given."""


class RunFileError(RunStoreError):
    """The file exists but is not a readable phasetop run."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot read run file {path}: {reason}")
        self.path = path
        self.reason = reason
        """Why, in one line: "requests[0] is an int where an object was expected"."""


class RunsDirError(RunStoreError):
    """The runs dir is not a directory, or cannot be listed."""


@dataclass(frozen=True)
class RunListing:
    """What a runs dir holds: the readable runs' headers and the files skipped, each with its reason."""

    headers: list[dict[str, Any]] = field(default_factory=list)
    """`run_header` plus `path`, in id order (ids start with the UTC start time: oldest first)."""
    skipped: list[RunFileError] = field(default_factory=list)
    """The `.json` files that are not readable runs, in name order."""

    def duplicates(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(first, later) header pairs whose files hold the same id: both are listed, the later is named."""
        first: dict[str, dict[str, Any]] = {}
        pairs = []
        for header in self.headers:
            seen = first.setdefault(str(header["id"]), header)
            if seen is not header:
                pairs.append((seen, header))
        return pairs


def default_runs_dir(chosen: str | None = None) -> Path:
    """The directory chosen (a flag or the runs_dir setting), else `runs` in the user data dir
    (e.g. ~/.local/share/phasetop/runs)."""
    return Path(chosen).expanduser() if chosen else Path(user_data_dir("phasetop")) / "runs"


def save_run(run: dict[str, Any], directory: Path) -> Path:
    """Write the run as `<directory>/<id>.json` atomically and return its path.

    Every registered secret (`tui.core.untrusted`: the API key, URL credentials, registered as settings are
    made) is redacted from the run before it is written, and `server.url` is saved without credentials.
    Raises OSError when the directory cannot be written.
    """
    # orjson: a live session saved at every batch's end is some 16,000 offsets at 32 streams (json took 20× longer).
    document = _finite(redact_all(_without_url_credentials(run)))
    try:
        text = _dumps(document)
    except orjson.JSONEncodeError:  # a lone surrogate from the server (a model id of `\ud93f`): saved as that text
        text = _dumps(surrogates_escaped(document))
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    remove_dead_temps(directory)
    return write_atomic(directory / f"{run['id']}.json", text)


def _dumps(document: object) -> str:
    return orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE).decode()


def write_atomic(path: Path, text: str) -> Path:
    """Write text to path so that any reader, or a crash at any moment, sees the old file whole or the new one whole.

    A hidden temp file beside the target, fsync, `os.replace`, then fsync of the directory.
    Raises OSError.
    """
    path = Path(path)
    directory = path.parent
    fd, temp = tempfile.mkstemp(dir=directory, prefix=f".{path.stem}.{os.getpid()}.", suffix=TEMP_SUFFIX)
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


def scan_runs(directory: Path) -> RunListing:
    """The runs in the directory and the files skipped with their reasons; a missing directory holds none.

    Temp files left by killed saves are removed first. Raises RunsDirError when `directory` is not a
    directory or cannot be listed.
    """
    directory = Path(directory)
    try:
        if not directory.exists():
            return RunListing()
        if not directory.is_dir():
            raise RunsDirError(f"{directory} is not a directory")
    except OSError as error:
        raise RunsDirError(f"cannot read {directory}: {error.strerror or error}") from None
    remove_dead_temps(directory)
    headers, skipped = [], []
    for path in _run_files(directory):
        try:
            headers.append({**run_header(_read(path)), "path": str(path)})
        except RunFileError as error:
            skipped.append(error)
    headers.sort(key=lambda header: (str(header["id"]), header["path"]))
    return RunListing(headers, skipped)


def list_runs(directory: Path) -> list[dict[str, Any]]:
    """Headers (`run_header` plus `path`) of the runs in the directory, oldest first; unreadable files are skipped."""
    return scan_runs(directory).headers


def load_run(ref: str, directory: Path) -> dict[str, Any]:
    """The run named by `ref`: a file path, an id, or a prefix of exactly one id in the directory."""
    path = Path(ref).expanduser()
    if path.suffix == ".json" or os.sep in ref or (os.altsep and os.altsep in ref):
        if not path.is_file():
            raise RunNotFound(f"no run file {ref}")
        return _read(path)
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise RunsDirError(f"{directory} is not a directory (give a run file's path, or --runs-dir)")
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


def completion_ids_since(directory: Path, since_unix: float) -> set[str]:
    """The completion ids of the requests of every readable run saved in `directory` at `since_unix` or later: the
    answers phasetop itself asked for (probe, bench, the UI) while something else watched the server."""
    ids: set[str] = set()
    try:
        files = _run_files(Path(directory))
    except RunsDirError:
        return ids
    for path in files:
        try:
            if path.stat().st_mtime < since_unix:
                continue
            run = _read(path)
        except (OSError, RunStoreError):
            continue
        ids.update(r["completion_id"] for r in run.get("requests") or []
                   if isinstance(r, dict) and isinstance(r.get("completion_id"), str))
    return ids


def _finite(value: object) -> object:
    """JSON has no inf or NaN: they are kept as the strings "inf", "-inf", "nan" (a request rate may be inf)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def remove_dead_temps(directory: Path) -> None:
    """Remove the temp files of saves that were killed: their writer's pid is gone, or they are STALE_TEMP_S old.

    A temp of this process is left alone unless stale: another thread may be writing it now.
    """
    cutoff = time.time() - STALE_TEMP_S
    try:
        temps = list(Path(directory).glob(f".*{TEMP_SUFFIX}"))
    except OSError:
        return
    for temp in temps:
        pid = _writer_pid(temp.name)
        try:
            dead = pid is not None and pid != os.getpid() and not psutil.pid_exists(pid)
            if dead or temp.stat().st_mtime < cutoff:
                temp.unlink()
        except OSError:
            pass  # another save removed it, or it is not ours to remove


def _writer_pid(name: str) -> int | None:
    """The pid in `.<stem>.<pid>.<random>.tmp`; None for a name without one."""
    parts = name.split(".")
    return int(parts[-3]) if len(parts) >= 5 and parts[-3].isdigit() else None


def _without_url_credentials(run: dict[str, Any]) -> dict[str, Any]:
    server = run.get("server")
    if isinstance(server, dict) and isinstance(server.get("url"), str):
        return {**run, "server": {**server, "url": without_credentials(server["url"])}}
    return run


def _run_files(directory: Path) -> list[Path]:
    """Run files only: temp files are hidden (leading dot) and end in .tmp."""
    try:
        return sorted(p for p in directory.glob("*.json") if not p.name.startswith(".") and p.is_file())
    except OSError as error:
        raise RunsDirError(f"cannot list {directory}: {error.strerror or error}") from None


def _read(path: Path) -> dict[str, Any]:
    """The run in the file, checked against the run schema; a bench `--save` document is read as a bench run, and
    an older phasetop's UI session as kind "ui"."""
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise RunFileError(path, error.strerror or str(error)) from None
    except (UnicodeDecodeError, ValueError) as error:
        raise RunFileError(path, f"not JSON ({error})") from None
    except RecursionError:
        raise RunFileError(path, "not JSON a reader can walk (nested too deep)") from None
    if is_bench_document(run):
        run = run_from_bench_document(run, path.stem)
    try:
        check_run(run)
    except RunInvalid as error:
        raise RunFileError(path, str(error)) from None
    return read_as_ui_session(run)


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
