"""Settings: CLI flag > `PHASETOP_*` environment > `.env` > TOML file > defaults.

CLI values arrive as init kwargs (the highest-priority source). Nothing touches disk or the
environment at import; `load_settings` does, when called.
"""

from __future__ import annotations

import base64
import difflib
import os
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from dotenv import dotenv_values
from platformdirs import user_config_dir
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, TomlConfigSettingsSource
from pydantic_settings import SettingsError as _SourceError

from tui.core.fleet.promql import Matcher
from tui.core.hardware.devices import UnknownDeviceError, find_device
from tui.core.hardware.models import find_model
from tui.core.untrusted import register_secret, register_url_credentials
from tui.core.urls import usable_url

ApiKind = Literal["auto", "openai", "ollama", "llamacpp"]
ThemeName = Literal[
    "phasetop-projector", "textual-dark", "textual-light", "ansi-dark", "ansi-light", "atom-one-dark", "atom-one-light",
    "catppuccin-frappe", "catppuccin-latte", "catppuccin-macchiato", "catppuccin-mocha", "dracula", "flexoki", "gruvbox",
    "monokai", "nord", "rose-pine", "rose-pine-dawn", "rose-pine-moon", "solarized-dark", "solarized-light", "tokyo-night",
]
"""phasetop's own theme (tui.app.themes) and Textual's built-in ones, named here so a typo is a settings error
before anything starts (the CLI never loads Textual); a test checks the list against the app's themes."""
ENV_PREFIX = "PHASETOP_"
MIN_POLL_INTERVAL_S = 0.1
"""The fastest a telemetry source may sample: ten a second is already more than a pane can show."""


class SettingsError(ValueError):
    """A setting, file or variable phasetop cannot use, in one line that names where it came from."""


class _Section(BaseModel):
    """A `[section]` of the settings: an unknown key in it is an error, not ignored."""

    model_config = ConfigDict(extra="forbid")


class SimSettings(_Section):
    """The embedded simulator started when no server answers."""

    gpu: str = "H100 SXM"
    """Device preset whose bandwidth and FLOPs set the simulated timings."""
    model: str = "8b"
    """Model preset or a config.json path."""
    time_scale: float = Field(default=1.0, gt=0, le=1000, allow_inf_nan=False)
    """Stretch simulated time (2.0 = twice as slow) for demos."""

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, name: str) -> str:
        """Checked at load, so the UI never starts a simulator that cannot run."""
        try:
            find_device(name)
        except UnknownDeviceError as error:
            raise ValueError(str(error)) from None
        return name

    @field_validator("model")
    @classmethod
    def _known_model(cls, name: str) -> str:
        try:
            find_model(name)
        except (ValueError, OSError, KeyError, TypeError) as error:
            raise ValueError(str(error)) from None
        return name


class PollSettings(_Section):
    """How often the telemetry sources sample."""

    metrics_interval_s: float = Field(default=1.0, ge=MIN_POLL_INTERVAL_S, le=3600, allow_inf_nan=False)
    """Seconds between /metrics scrapes."""
    metrics_window_s: float = Field(default=30.0, ge=1, le=3600, allow_inf_nan=False)
    """Seconds the metrics pane's quantiles and rates span (a rolling window of scrapes), so one request's
    TTFT stays on screen for this long instead of one scrape."""
    gpu_interval_s: float = Field(default=1.0, ge=MIN_POLL_INTERVAL_S, le=3600, allow_inf_nan=False)
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


class PrometheusSettings(_Section):
    """The Prometheus the fleet view reads (`phasetop fleet`, `phasetop --prometheus`)."""

    url: str | None = None
    """Base URL of its HTTP API (`http://prometheus:9090`, or with a path prefix)."""
    bearer_token: SecretStr | None = None
    """Sent as `Authorization: Bearer …`. Never printed, logged, shown or saved."""
    username: str | None = None
    """With `password`: HTTP basic auth (instead of a bearer token)."""
    password: SecretStr | None = None
    """Basic auth's password. Never printed, logged, shown or saved."""
    dcgm_host_label: str = "Hostname"
    """The label of dcgm-exporter's series that names the GPU's host."""
    instance_host_label: str = "instance"
    """The label of a serving instance's series whose host part (before `:port`) is matched with `dcgm_host_label`."""
    role_label: str | None = None
    """A label naming each instance's role (`prefill`, `decode`) for the pools; unset: a KV connector's inflow says decode."""
    lookback_s: float = Field(default=600.0, ge=10, le=86400, allow_inf_nan=False)
    """How far back an instance counts as part of the fleet (a down one stays listed this long), and restarts are counted."""
    window_s: float = Field(default=60.0, ge=2, le=3600, allow_inf_nan=False)
    """The `rate(…[window])` of every rate and quantile, seconds."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        return url if url is None else usable_url(url)

    @field_validator("dcgm_host_label", "instance_host_label", "role_label")
    @classmethod
    def _label_name(cls, label: str | None) -> str | None:
        """A label name, or an error at load rather than an empty column later."""
        if label is not None:
            Matcher(label, "=", "")
        return label

    def password_text(self) -> str:
        """The password itself ("" when none), only for registering it to be redacted."""
        return self.password.get_secret_value() if self.password else ""

    def basic_credentials(self) -> str | None:
        """Basic auth's base64 `username:password`, None without a username."""
        if self.username is None:
            return None
        return base64.b64encode(f"{self.username}:{self.password_text()}".encode()).decode()


class Settings(BaseSettings):
    """Everything phasetop can be configured with."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",  # load_settings refuses unknown keys itself, naming the file or variable
    )

    url: str = "http://127.0.0.1:8000"
    """Base URL of the inference server."""
    api: ApiKind = "auto"
    """Wire API; auto-detected unless set."""
    api_key: SecretStr | None = None
    """Bearer token for the server. Never printed, logged, shown or saved."""
    model: str | None = None
    """Model name to request; the server's first model when unset."""
    timeout_s: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    """Seconds a whole answer may take (a JSON document, /metrics, a stream's head); a token stream may run
    longer, but not go silent this long."""
    bandwidth_gbs: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Memory bandwidth of the server's device for its decode ceiling, GB/s, when NVML and the presets
    cannot say (a CPU host's measured bandwidth, a GPU on another host)."""
    exact_length: bool = True
    """Ask for exactly max_tokens (`ignore_eos`, `min_tokens`) so a model that can stop does not make runs
    short; False lets the model stop (`--allow-eos`). Ollama offers no such option."""
    runs_dir: str | None = None
    """Where saved runs go; the user data dir's `runs` when unset."""
    meters: int | None = Field(default=None, ge=1, le=64)
    """Processes that read and time the token streams (`tui.meter`); unset: as many as the streams need and the
    free cores allow. The UI always measures in processes apart from the one that renders; the CLI, at 1, in itself."""
    otlp: str | None = None
    """`[HOST:]PORT` the UI's trace receiver listens on (OTLP/HTTP protobuf, `/v1/traces`) for the traffic view;
    unset: none, except for phasetop's own simulator, which exports to one on a free loopback port."""
    theme: ThemeName = "textual-dark"
    """The UI's colours; "phasetop-projector" is bright text on black for a projector. A theme picked in the
    UI (the command palette's "Theme") is written back here, into the config file the settings came from."""
    sim: SimSettings = SimSettings()
    poll: PollSettings = PollSettings()
    limits: LimitSettings = LimitSettings()
    prometheus: PrometheusSettings = PrometheusSettings()

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        return usable_url(url)

    def model_post_init(self, context: Any) -> None:
        # However these settings were made, from here on every output path redacts the key and the URL's
        # credentials (tui.core.untrusted).
        register_secret(self.api_key_text())
        register_url_credentials(self.url)
        prometheus = self.prometheus
        register_secret(prometheus.bearer_token.get_secret_value() if prometheus.bearer_token else "")
        register_secret(prometheus.password_text())
        register_secret(prometheus.basic_credentials())
        if prometheus.url:
            register_url_credentials(prometheus.url)

    def api_key_text(self) -> str:
        """The key itself ("" when none), only for registering it to be redacted."""
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


def load_settings(config_file: str | Path | None = None, flag_names: dict[str, str] | None = None,
                  **cli_values: Any) -> Settings:
    """Settings from every source; CLI values that are None (flag not given) do not override.

    Nested sections take dotted keys from the CLI (`**{"sim.gpu": "H200"}`); `flag_names` (`{"sim.gpu": "--gpu"}`)
    lets an error name the flag a bad value came from. Raises FileNotFoundError for a
    named file that is not there and SettingsError for everything else: a file that cannot be read or is not
    TOML, an unknown key (in the file, `.env`, or a PHASETOP_ variable close to a setting's name), a value out
    of range; the message names the file or variable.
    """
    path = Path(config_file) if config_file else default_config_file()
    if config_file and not path.exists():
        raise FileNotFoundError(f"config file not found: {path}")
    toml = _read_toml(path) if config_file or path.exists() else {}
    _refuse_unknown_keys(toml, Settings, f"in {path}")
    dotenv_path = Path.cwd() / ".env"
    dotenv = _read_dotenv(dotenv_path)
    _refuse_unknown_variables(os.environ, "in the environment")
    _refuse_unknown_variables(dotenv, f"in {dotenv_path}")

    class _FromFile(Settings):
        model_config = SettingsConfigDict(toml_file=path)

    init: dict[str, Any] = {}
    for key, value in cli_values.items():
        if value is None:
            continue
        section, _, name = key.rpartition(".")
        (init.setdefault(section, {}) if section else init)[name] = value
    try:
        settings = _FromFile(**init)
    except ValidationError as error:
        raise SettingsError(_describe(error, init, flag_names or {}, dotenv, dotenv_path, toml, path)) from None
    except _SourceError as error:  # e.g. a section's variable that is not JSON
        raise SettingsError(str(error)) from None
    return settings


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except OSError as error:
        raise SettingsError(f"cannot read config file {path}: {error.strerror or error}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise SettingsError(f"config file {path} is not valid TOML: {error}") from None


def _read_dotenv(path: Path) -> dict[str, str | None]:
    if not path.exists():
        return {}
    try:
        path.read_bytes()  # python-dotenv reports an unreadable file no better than a traceback
        return dotenv_values(path)
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or error
        raise SettingsError(f"cannot read {path}: {reason}") from None


def _sections(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """The fields of `model` that are sections (nested models), by name."""
    found = {}
    for name, field in model.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            found[name] = field.annotation
    return found


def _leaves(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every dotted key `model` takes: `url`, `sim.gpu`, ..."""
    sections = _sections(model)
    keys = []
    for name in model.model_fields:
        keys += _leaves(sections[name], f"{prefix}{name}.") if name in sections else [f"{prefix}{name}"]
    return keys


def _refuse_unknown_keys(data: dict[str, Any], model: type[BaseModel], where: str, prefix: str = "") -> None:
    """A TOML key no setting has is an error, with the closest key there is: a typo is never ignored."""
    sections = _sections(model)
    for key, value in data.items():
        if key in sections and isinstance(value, dict):
            _refuse_unknown_keys(value, sections[key], where, f"{prefix}{key}.")
        elif key not in model.model_fields:
            close = difflib.get_close_matches(key, list(model.model_fields), n=1, cutoff=0.6)
            if close:
                close = [prefix + close[0]]
            else:  # a key in the wrong section: `gpu` at the top for `sim.gpu`
                leaves = {leaf.rpartition(".")[2]: leaf for leaf in _leaves(Settings)}
                close = [leaves[k] for k in difflib.get_close_matches(key, list(leaves), n=1, cutoff=0.8)]
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise SettingsError(f"unknown setting {prefix + key!r} {where}{hint}")


def _refuse_unknown_variables(names: Iterable[str], where: str) -> None:
    """A PHASETOP_ variable for an unknown key of a section, or one close to a setting's name, is an error.

    Others (PHASETOP_DEBUG, a test suite's own) are left alone: the prefix is shared with tools around phasetop.
    """
    sections = _sections(Settings)
    for name in names:
        if not name.upper().startswith(ENV_PREFIX):
            continue
        rest = name[len(ENV_PREFIX):].lower()
        section, nested, key = rest.partition("__")
        if nested and section in sections:
            fields = list(sections[section].model_fields)
            if key in fields:
                continue
            close = [f"{section}__{k}" for k in difflib.get_close_matches(key, fields, n=1, cutoff=0.6)]
        elif rest in Settings.model_fields:
            continue
        else:
            known = [leaf.replace(".", "__") for leaf in _leaves(Settings)]
            close = difflib.get_close_matches(rest, known, n=1, cutoff=0.8)
            if not close:
                continue
        hint = f" (did you mean {ENV_PREFIX}{close[0].upper()}?)" if close else ""
        raise SettingsError(f"unknown setting {name} {where}{hint}")


def _describe(error: ValidationError, init: dict[str, Any], flag_names: dict[str, str], dotenv: dict[str, Any],
              dotenv_path: Path, toml: dict[str, Any], path: Path) -> str:
    """The first problem in one line: the key, where its value came from (flag, variable, file), and why."""
    first = error.errors()[0]
    loc = [str(part) for part in first["loc"]]
    key = ".".join(loc)
    message = first["msg"].removeprefix("Value error, ")
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    if _has(init, loc) and key in flag_names:
        return f"{flag_names[key]}: {message}{more}"
    return f"{key} {_source(loc, init, dotenv, dotenv_path, toml, path)}: {message}{more}"


def _source(loc: list[str], init: dict[str, Any], dotenv: dict[str, Any], dotenv_path: Path, toml: dict[str, Any],
            path: Path) -> str:
    """Where the value at `loc` came from, by the sources' precedence."""
    if _has(init, loc):
        return "from the command line"
    environ = {name.upper(): name for name in os.environ}
    in_dotenv = {name.upper(): name for name in dotenv}
    for depth in range(len(loc), 0, -1):
        variable = ENV_PREFIX + "__".join(loc[:depth]).upper()
        if variable in environ:
            return f"from {environ[variable]}"
        if variable in in_dotenv:
            return f"from {in_dotenv[variable]} in {dotenv_path}"
    if _has(toml, loc):
        return f"in {path}"
    return "(default)"


def _has(data: Any, loc: list[str]) -> bool:
    for part in loc:
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True
