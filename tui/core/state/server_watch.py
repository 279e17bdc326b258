"""The server the main screen watches, as a plain value, and the one owner of what is known of it: as described,
up or down, what phasetop is doing to it (the header's `ServerState`), its latest scrape and this host's devices,
and the decode ceiling and guard derived from them (or given) that every measurement on it is judged by."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from tui.core.hardware.server_ceiling import ServerCeiling, ceiling_for
from tui.core.measure.delivery import Guard
from tui.core.state.server_state import ServerState
from tui.core.telemetry.readings import GpuReading, MetricsSnapshot
from tui.core.untrusted import one_line


@dataclass(frozen=True, slots=True)
class Served:
    """The server as described when it came up."""

    api: str
    model: str | None
    model_bytes: int | None = None


class ServerWatch:
    """The server as last seen. `ceiling`: (decode ceiling tok/s, KV bytes per token, weight bytes) when phasetop
    knows the model and device (a simulator it started); else one is derived once the server and this host's
    devices are known. `header`: what the header says before the server answers (its URL, a simulator's label)."""

    def __init__(self, ceiling: tuple[float, float, float] | None = None, server_is_local: bool = False,
                 bandwidth_gbs: float | None = None, header: ServerState | None = None) -> None:
        self._header = header or ServerState(url="")
        """What the header says, less the ceiling (`header` adds it)."""
        self._given_ceiling = ceiling
        self._server_is_local = server_is_local
        self._bandwidth_gbs = bandwidth_gbs
        self.served: Served | None = None
        """What the server is, once it answered."""
        self.server_fresh: bool | None = None
        """True while the server has served nothing since it came up (its /metrics said so then): the next
        request sent pays its cold start and is marked cold."""
        self.simulator_flags: dict[str, str] | None = None
        """A phasetop simulator's flags, when the server turns out to be one (its identity says so)."""
        self.derived: ServerCeiling | None = None
        """The ceiling derived for a server phasetop did not start."""
        self.metrics: MetricsSnapshot | None = None
        """The latest /metrics snapshot."""
        self.devices: Sequence[GpuReading] | None = None
        """This host's GPUs as last sampled (empty: none); None before the first sample."""

    @property
    def bandwidth_ceiling_tok_s(self) -> float | None:
        """One stream's decode ceiling from the bandwidth alone: given, or derived for the server described."""
        return self._given_ceiling[0] if self._given_ceiling else self.derived.decode_ceiling_tok_s if self.derived else None

    @property
    def guard(self) -> Guard:
        """What every measurement on this server is judged by: its bandwidth's ceiling and, for a server that
        speculates, its tokens a step as its latest scrape says (the load dial's and the experiments' too)."""
        return Guard(None, self.bandwidth_ceiling_tok_s, self.speculation_factor)

    @property
    def decode_ceiling_tok_s(self) -> float | None:
        """The bandwidth's ceiling, × the tokens a step of a server that speculates (`speculation_factor`)."""
        return self.guard.ceiling_tok_s

    @property
    def speculation_factor(self) -> float | None:
        """A speculating server's mean accepted length, as its latest scrape says; None for one that does not."""
        speculation = self.metrics.speculation if self.metrics is not None else None
        return speculation.mean_accepted_length if speculation is not None else None

    @property
    def kv_bytes_per_token(self) -> float | None:
        if self._given_ceiling:
            return self._given_ceiling[1]
        return self.derived.kv_bytes_per_token if self.derived else None

    @property
    def header(self) -> ServerState:
        """What the header says of the server: as described, up or down, its config, its decode ceiling (given or
        derived, with the device it was derived for) and what phasetop is doing to it."""
        device = self.derived.device if self.derived else None
        return replace(self._header, ceiling_tok_s=self.decode_ceiling_tok_s, ceiling_factor=self.speculation_factor,
                       device=device)

    def sent_to(self) -> None:
        """A request went to the server: it is no longer fresh, whichever request this is."""
        self.server_fresh = False

    def server_up(self, served: Served, fresh: bool | None, max_model_len: int | None = None) -> None:
        self.served, self.server_fresh = served, fresh
        self._header = replace(self._header, kind=served.api, model=served.model, max_model_len=max_model_len,
                               down_since=None, down_reason=None)
        self._derive_ceiling()

    def server_down(self, since: float, reason: str | None) -> None:
        """The server stopped answering (`since`: unix time); an outage under way keeps its first moment."""
        self._header = replace(self._header, down_since=self._header.down_since or since, down_reason=reason)

    def restarting(self, changes: str) -> None:
        self._header = replace(self._header, note="restarting: " + changes)

    def restart_progress(self, elapsed_s: float, line: str) -> None:
        """The served command's latest log line while it starts (untrusted: one line)."""
        note = (self._header.note or "restarting").split(" · ", 1)[0]
        self._header = replace(self._header, note=f"{note} · {elapsed_s:.0f} s: {one_line(line, 120)}")

    def restart_ended(self) -> None:
        self._header = replace(self._header, note=None)

    def gpu_sampled(self, devices: Sequence[GpuReading]) -> None:
        self.devices = devices
        self._derive_ceiling()

    def identified(self, simulator_flags: dict[str, str] | None) -> None:
        self.simulator_flags = simulator_flags
        self._derive_ceiling()

    def scraped(self, snapshot: MetricsSnapshot) -> bool:
        """The latest /metrics; True when it is the first answer after an outage (the server is back)."""
        self.metrics = snapshot
        back = self._header.down_since is not None
        self._header = replace(self._header, down_since=None, down_reason=None,
                               config=ServerState.config_from(snapshot.engine_config, self.simulator_flags))
        return back

    def _derive_ceiling(self) -> None:
        """A ceiling for a server phasetop did not start: a phasetop simulator's from the flags it publishes;
        a real server's once its model and this host's devices are known: from NVML's GPUs, or the CPU row
        where there is none; the weights from the model id, or their real size (llama.cpp)."""
        if self._given_ceiling or self.served is None or self.served.model is None:
            return
        derived = ceiling_for(self.simulator_flags, self.served.model, self.devices, self._server_is_local,
                              self.served.model_bytes, self._bandwidth_gbs)
        if derived is not None:
            self.derived = derived
