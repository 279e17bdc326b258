"""What a meter process and its parent say: commands down its stdin, events up its stdout, one pickled object a frame.

Pickle, because both ends are phasetop's own code: the parent starts the child with its own interpreter, and the
child reads nothing but that pipe. A frame is its length (4 bytes, little-endian), then the pickle.
"""

from __future__ import annotations

import pickle
import struct
from dataclasses import dataclass

from tui.core.measure.records import RequestTiming
from tui.sources import errors
from tui.sources.http import StreamTarget
from tui.sources.stream import StreamRequest

LENGTH = struct.Struct("<I")
FRAME_S = 0.05
"""How often a meter reports what it read, unless told otherwise: about 20 times a second, as often as a screen draws."""


def encode(message: object) -> bytes:
    """One frame."""
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return LENGTH.pack(len(body)) + body


class Frames:
    """Splits a byte stream into the messages its frames hold."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[object]:
        self._buffer += data
        messages = []
        while len(self._buffer) >= LENGTH.size:
            (size,) = LENGTH.unpack_from(self._buffer)
            if len(self._buffer) < LENGTH.size + size:
                break
            messages.append(pickle.loads(self._buffer[LENGTH.size:LENGTH.size + size]))
            del self._buffer[:LENGTH.size + size]
        return messages


# ---- down: the parent's commands ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hello:
    """The first command: the parent's clock (`wall_clock.offset_s`), so both stamp on one, and how often to report."""

    clock_offset_s: float
    frame_s: float


@dataclass(frozen=True, slots=True)
class OpenServer:
    """Streams to `server` go to this target from now on."""

    server: int
    target: StreamTarget


@dataclass(frozen=True, slots=True)
class WarmUp:
    job: int
    server: int
    path: str
    connections: int


@dataclass(frozen=True, slots=True)
class Stream:
    job: int
    server: int
    request: StreamRequest
    connect_s: float | None
    text: bool
    """Send the chunks' text in the frames too (the prompt pane's answer); the final record always has it."""


@dataclass(frozen=True, slots=True)
class Cancel:
    """Stop a stream (its reader went away); nothing more is said of it."""

    job: int


# ---- up: the meter's events ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WarmedUp:
    job: int
    connect_s: float | None
    error: tuple[str, str] | None = None
    """(the SourceError's class name, its line) when the warm-up failed."""


@dataclass(frozen=True, slots=True)
class LaneFrame:
    """One stream's news since its last frame."""

    job: int
    t_sent_unix: float | None
    """When its body went on the wire (None until it did)."""
    offsets_s: tuple[float, ...]
    text: str
    client_gaps: tuple[int, ...]
    """Gaps found to be the meter's own since the last frame (the final record has them all)."""
    tokens_per_chunk: tuple[int, ...] | None = None
    """The tokens each new chunk carried; None: one each."""


@dataclass(frozen=True, slots=True)
class Frame:
    """Every stream's news, once a frame interval (only when there is some)."""

    lanes: tuple[LaneFrame, ...]
    cpu_pct: float | None
    """The meter's CPU over its latest interval, percent of one core."""


@dataclass(frozen=True, slots=True)
class Finished:
    """A stream ended; `timing` is its exact record (its gaps and marks judged by the meter)."""

    job: int
    timing: RequestTiming


@dataclass(frozen=True, slots=True)
class Failed:
    """A job (a stream, a warm-up) hit an error the meter does not expect (a bug of its own): `reason`, one line.
    Its parent ends the job as it ends one whose process died, so nothing waits for an answer that never comes."""

    job: int
    reason: str


def error_of(failure: errors.SourceError) -> tuple[str, str]:
    return type(failure).__name__, str(failure)


def raised(error: tuple[str, str]) -> errors.SourceError:
    """The SourceError a meter reported, as its class (ServerUnavailable means nothing answers; callers tell)."""
    name, line = error
    kind = getattr(errors, name, None)
    if isinstance(kind, type) and issubclass(kind, errors.SourceError) and kind is not errors.ServerRejected:
        return kind(line)
    return errors.SourceError(line)
