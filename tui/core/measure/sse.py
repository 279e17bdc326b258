"""Line framing of streamed answers: SSE `data:` events and NDJSON lines, split from raw bytes.

Pure, so the reading loop stays lean and these rules are tested without a socket.
"""

from __future__ import annotations

SSE_DONE = b"[DONE]"
"""The payload that ends an OpenAI-compatible stream."""


class LineSplitter:
    """Cuts a byte stream into complete lines; a partial line waits for the next read."""

    __slots__ = ("_tail",)

    def __init__(self) -> None:
        self._tail = b""

    def feed(self, data: bytes) -> list[bytes]:
        """The complete lines in `data` (plus what was left over), without their line ends."""
        if self._tail:
            data = self._tail + data
        lines = data.split(b"\n")
        self._tail = lines.pop()
        if b"\r" in data:  # CRLF servers only: most send bare LF, and this loop is per chunk
            return [line[:-1] if line.endswith(b"\r") else line for line in lines]
        return lines

    @property
    def pending(self) -> bytes:
        """Bytes after the last line end: a line the stream never finished."""
        return self._tail


def sse_field(line: bytes) -> tuple[bytes, bytes] | None:
    """(field, value) of one SSE line, as bytes (a JSON parser reads them as they are), or None for a blank
    line or a `:` comment.

    Only `data` and `error` matter here: llama.cpp b4747 sends mid-stream errors as `error: {...}`.
    """
    if not line or line[0] == 0x3A:  # b":" comment, e.g. keep-alive pings
        return None
    name, sep, value = line.partition(b":")
    if value[:1] == b" ":
        value = value[1:]
    return name, value
