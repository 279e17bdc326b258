"""Named hostile-server scenarios on the scripted server (testbeds/scripted_server.py): what a server that
lies, stalls, floods or echoes secrets sends. Each returns a Script; `serving(script)` runs it for a test.

    with serving(hostile.escape_laden()) as server:
        run_cli("probe", "--url", server.url)
"""

from __future__ import annotations

import functools
import zlib
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from testbeds.scripted_server import GENERATION_PATHS, Reply, Script, ScriptedServer

ESCAPES = "\x1b]0;pwned-title\x07\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[31m\x9b1m\x07\r"
"""A pane title (OSC 0), a clipboard write (OSC 52), a screen clear, a colour, a C1 CSI, a bell and a
carriage return: everything a terminal would act on if printed raw."""

CONTROL_BYTES = set(range(0x00, 0x09)) | set(range(0x0B, 0x20)) | {0x7F} | set(range(0x80, 0xA0))
"""Code points no human output of phasetop may carry raw (newline and tab are allowed)."""

SECRET = "sk-hostile-0123456789abcdef"
"""The API key tests set; it must appear in no output, run file or screenshot."""


COMMANDS = {
    "probe": ["probe", "--prompt-tokens", "20", "--max-tokens", "4"],
    "bench": ["bench", "--num-prompts", "2", "--prompt-tokens", "20", "--max-tokens", "4"],
    "metrics": ["metrics", "--once"],
    "ceiling": ["ceiling"],
    "sweep": ["sweep", "--vary", "prompt-tokens", "--values", "20,40", "--max-tokens", "4"],
}
"""Every command that talks to a server, with a workload small enough to run many times; add `--url`."""


def phasetop(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m tui ARGS` in `cwd`, with no PHASETOP_ variable or user config of this machine's, runs saved
    under cwd/runs; `env` adds variables. Its stdout and stderr come back as text."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PHASETOP_")}
    clean |= {"XDG_CONFIG_HOME": str(cwd / "config"), "PHASETOP_RUNS_DIR": str(cwd / "runs"), **(env or {})}
    done = subprocess.run([sys.executable, "-m", "tui", *args], cwd=cwd, env=clean, capture_output=True, timeout=120)
    # Decoded by hand: text mode would turn a raw "\r" into "\n" and hide it from `raw_controls`.
    done.stdout, done.stderr = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    return done


def raw_controls(text: str) -> list[str]:
    """The raw control characters in `text`, for an assertion message."""
    return [repr(ch) for ch in text if ord(ch) in CONTROL_BYTES]


def escape_laden(failing: bool = False) -> Script:
    """Escape sequences in the model id, /version and a metric label (an OpenAI-compatible server); with
    `failing`, every generation answers HTTP 500 with them in the error body."""
    model = f"evil{ESCAPES}model"
    script = Script(model=model)
    script.replies["/version"] = Reply({"version": f"0.33.0{ESCAPES}"})
    script.replies["/metrics"] = Reply(
        f'vllm:num_requests_running{{model_name="{model}"}} 1\n', content_type="text/plain"
    )
    if failing:
        for path in ("/v1/completions", "/v1/chat/completions"):
            script.replies[path] = Reply({"error": {"message": f"engine died{ESCAPES}", "code": 500}}, status=500)
    return script


def echoing_key(kind: str = "openai") -> Script:
    """A server that puts the caller's Authorization header into its model id, version and errors."""
    script = Script(kind=kind, api_key=SECRET)
    script.replies["/v1/models"] = Reply({"object": "list", "data": [{"id": "m {auth}", "object": "model"}]})
    script.replies["/version"] = Reply({"version": "0.33.0 {auth}"})
    script.replies["/metrics"] = Reply('vllm:num_requests_running{model_name="m {auth}"} 1\n'
                                       'vllm:cache_config_info{block_size="16",served_key="{auth}"} 1\n', content_type="text/plain")
    for path in ("/v1/completions", "/v1/chat/completions"):
        script.replies[path] = Reply({"error": {"message": "invalid credentials: {auth}", "code": 500}}, status=500)
    return script


def dripping(path: str, kind: str = "openai", byte_every_s: float = 1.0) -> Script:
    """A server that answers `path` one byte a second: it never goes silent long enough for a read timeout."""
    script = Script(kind=kind)
    script.replies[path] = Reply({"object": "list", "data": [{"id": "slow", "object": "model"}], "pad": "x" * 200},
                                 drip_s=byte_every_s, content_type="text/plain" if path == "/metrics" else "application/json")
    return script


def dripping_head(path: str = "/v1/completions", byte_every_s: float = 1.0) -> Script:
    """A server whose answer to `path` (a generation, by default) drips from its first byte: the head never
    completes within any deadline, though no read ever waits a second."""
    script = Script()
    script.replies[path] = Reply(b"data: [DONE]\n\n", content_type="text/event-stream", drip_s=byte_every_s,
                                 drip_head=True)
    return script


def endless_line(piece_bytes: int = 64 * 1024, pieces: int = 64) -> Script:
    """A stream that sends bytes fast but never a line end: `pieces` × `piece_bytes` of one SSE line."""
    return Script(stream=[b"data: " + b"x" * piece_bytes] * pieces, stream_gap_s=0.0)


@functools.cache
def bomb(inflated_mb: int = 64) -> bytes:
    """A gzip body of `inflated_mb` MB of a repeated metric line: a few hundred kB on the wire."""
    line = b"vllm:num_requests_running 1\n"
    megabyte = line * (2**20 // len(line))
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # gzip framing, built a megabyte at a time
    return b"".join(packer.compress(megabyte) for _ in range(inflated_mb)) + packer.flush()


def gzip_bomb(path: str = "/metrics", kind: str = "openai", inflated_mb: int = 64) -> Script:
    script = Script(kind=kind)
    content_type = "text/plain" if path == "/metrics" else "application/json"
    script.replies[path] = Reply(bomb(inflated_mb), content_type=content_type, headers={"Content-Encoding": "gzip"})
    return script


class OddOnce(ScriptedServer):
    """Serves the scripted tokens to every generation request but the `odd_request`-th (1-based), which gets
    the raw stream `lines`: one malformed answer among good ones."""

    def __init__(self, script: Script, lines: list[bytes], odd_request: int) -> None:
        super().__init__(script)
        self.lines, self.odd_request = lines, odd_request

    async def _respond(self, method, path, headers, body, received_ns, writer) -> bool:
        if path in GENERATION_PATHS:  # no await before the log entry: requests in flight cannot interleave here
            self.script.stream = self.lines if len(self.log) + 1 == self.odd_request else None
        return await super()._respond(method, path, headers, body, received_ns, writer)


@contextmanager
def serving(script: Script, server_class: type[ScriptedServer] = ScriptedServer, **extra) -> Iterator[ScriptedServer]:
    server = server_class(script, **extra).start()
    try:
        yield server
    finally:
        server.stop()
