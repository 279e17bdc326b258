"""Settings: CLI flag > `PHASETOP_*` environment > `.env` > TOML file > defaults.

CLI values arrive as init kwargs (the highest-priority source). Nothing touches disk or the
environment at import; `load_settings` does, when called.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from platformdirs import user_config_dir
from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from tui.core.untrusted import register_secret, register_url_credentials

ApiKind = Literal["auto", "openai", "ollama", "llamacpp"]


class SimSettings(BaseModel):
    """The embedded simulator started when no server answers."""

    gpu: str = "H100 SXM"
    """Device preset whose bandwidth and FLOPs set the simulated timings."""
    model: str = "8b"
    """Model preset or a config.json path."""
    time_scale: float = 1.0
    """Stretch simulated time (2.0 = twice as slow) for demos."""


class PollSettings(BaseModel):
    """How often the telemetry sources sample."""

    metrics_interval_s: float = 1.0
    """Seconds between /metrics scrapes."""
    gpu_interval_s: float = 1.0
    """Seconds between NVML samples."""


class LimitSettings(BaseModel):
    """The most phasetop reads of one answer, in decoded (inflated) bytes: a server cannot make it hold more.
    The defaults match `tui.sources.http.BodyLimits`."""

    metrics_max_bytes: int = Field(default=16 * 2**20, gt=0)
    """Largest /metrics page read."""
    document_max_bytes: int = Field(default=2**20, gt=0)
    """Largest JSON document (or other non-stream answer) read."""
    line_max_bytes: int = Field(default=2**20, gt=0)
    """Longest SSE or NDJSON line of a token stream."""


class Settings(BaseSettings):
    """Everything phasetop can be configured with."""

    model_config = SettingsConfigDict(
        env_prefix="PHASETOP_",
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",
    )

    url: str = "http://127.0.0.1:8000"
    """Base URL of the inference server."""
    api: ApiKind = "auto"
    """Wire API; auto-detected unless set."""
    api_key: SecretStr | None = None
    """Bearer token for the server. Never printed, logged, shown or saved."""
    model: str | None = None
    """Model name to request; the server's first model when unset."""
    timeout_s: float = Field(default=30.0, gt=0)
    """Longest silence from the server before a request is called failed."""
    bandwidth_gbs: float | None = Field(default=None, gt=0)
    """Memory bandwidth of the server's device for its decode ceiling, GB/s, when NVML and the presets
    cannot say (a CPU host's measured bandwidth, a GPU on another host)."""
    exact_length: bool = True
    """Ask for exactly max_tokens (`ignore_eos`, `min_tokens`) so a model that can stop does not make runs
    short; False lets the model stop (`--allow-eos`). Ollama offers no such option."""
    runs_dir: str | None = None
    """Where saved runs go; the user data dir's `runs` when unset."""
    sim: SimSettings = SimSettings()
    poll: PollSettings = PollSettings()
    limits: LimitSettings = LimitSettings()

    def api_key_text(self) -> str:
        """The key itself ("" when none), only for redacting it from output and refusing it in files."""
        return self.api_key.get_secret_value() if self.api_key else ""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = TomlConfigSettingsSource(settings_cls, toml_file=settings_cls.model_config.get("toml_file"))
        return (init_settings, env_settings, dotenv_settings, toml, file_secret_settings)


def default_config_file() -> Path:
    """`config.toml` in the user config dir (e.g. ~/.config/phasetop/config.toml)."""
    return Path(user_config_dir("phasetop")) / "config.toml"


def load_settings(config_file: str | Path | None = None, **cli_values: Any) -> Settings:
    """Settings from every source; CLI values that are None (flag not given) do not override.

    Nested sections take dotted keys from the CLI (`**{"sim.gpu": "H200"}`).
    """
    path = Path(config_file) if config_file else default_config_file()
    if config_file and not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")

    class _FromFile(Settings):
        model_config = SettingsConfigDict(toml_file=path)

    init: dict[str, Any] = {}
    for key, value in cli_values.items():
        if value is None:
            continue
        section, _, name = key.rpartition(".")
        (init.setdefault(section, {}) if section else init)[name] = value
    settings = _FromFile(**init)
    # From here on every output path redacts the key and the URL's credentials (tui.core.untrusted).
    register_secret(settings.api_key_text())
    register_url_credentials(settings.url)
    return settings
