"""What the header says of the server, as a plain value: which it is, whether it is up, its engine config, the
decode ceiling, and what phasetop is doing to it. `tui.core.state.server_watch.ServerWatch` keeps it; the header draws it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

CONFIG_KEYS = ("max_num_batched_tokens", "enable_prefix_caching", "max_model_len", "block_size", "num_gpu_blocks")
"""The engine's flags a restart changes, in the header's order, by the engine's own names (what a person
passes to restart it); from its /metrics config, else from a phasetop simulator's published flags."""


@dataclass(frozen=True, slots=True)
class ServerState:
    """What the status line says about the server."""

    url: str
    kind: str = "?"
    """The detected API; "?" until the server has answered once (the line then says "connecting…", or
    "unknown API" once it is down)."""
    model: str | None = None
    max_model_len: int | None = None
    simulated: str | None = None
    """"simulated H100 · Llama-3.1-8B" when phasetop started its own simulator."""
    down_since: float | None = None
    """Unix time the server stopped answering; None while it answers."""
    down_reason: str | None = None
    config: str | None = None
    """Engine config in one line (`config_from`: max_num_batched_tokens, prefix caching, ...)."""
    ceiling_tok_s: float | None = None
    """The single-stream decode ceiling for the model on that device, when known (a speculating server's: the
    bandwidth's × `ceiling_factor`)."""
    ceiling_factor: float | None = None
    """A speculating server's tokens a step (mean accepted length): a step reads the weights once for that many
    tokens, so the bandwidth's ceiling is multiplied by it; None for a server that does not speculate."""
    device: str | None = None
    """What a server phasetop did not start runs on, once its ceiling was derived (`ServerCeiling.device`)."""
    note: str | None = None
    """What phasetop is doing to the server it runs ("restarting: --max-num-batched-tokens 2048 → 256 · 12 s: …")."""

    @staticmethod
    def config_from(engine_config: Mapping[str, str], simulator_flags: Mapping[str, str] | None = None) -> str | None:
        """The config line: the engine's /metrics config first, a simulator's published flags for what it
        lacks (vLLM's /metrics has no max_num_batched_tokens); every value as the server sent it, so shown
        through one_line when described."""
        merged = {**(simulator_flags or {}), **engine_config}
        shown = [f"{key}={merged[key]}" for key in CONFIG_KEYS if merged.get(key) not in (None, "", "None")]
        return " ".join(shown) or None
