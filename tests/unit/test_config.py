import tomllib
from pathlib import Path

import pytest
from pydantic import BaseModel

from tui.config import Settings, SettingsError, load_settings

EXAMPLE = Path(__file__).resolve().parents[2] / "config.example.toml"


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """An empty working dir (for .env) and an environment with no PHASETOP_ variables."""
    monkeypatch.chdir(tmp_path)
    import os
    for name in list(os.environ):
        if name.startswith("PHASETOP_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return tmp_path


def write_toml(path, url="http://toml:1", gpu="A10G"):
    path.write_text(f'url = "{url}"\ntimeout_s = 5\n[sim]\ngpu = "{gpu}"\n')
    return path


def test_defaults(workdir):
    s = load_settings()
    assert s.url == "http://127.0.0.1:8000" and s.api == "auto" and s.api_key is None
    assert s.sim.gpu == "H100 SXM"


def test_precedence_cli_over_env_over_dotenv_over_toml_over_defaults(workdir, monkeypatch):
    toml = write_toml(workdir / "c.toml")
    # TOML beats defaults
    s = load_settings(toml)
    assert s.url == "http://toml:1" and s.sim.gpu == "A10G" and s.timeout_s == 5
    # .env beats TOML
    (workdir / ".env").write_text("PHASETOP_URL=http://dotenv:2\nPHASETOP_SIM__GPU=L40S\n")
    s = load_settings(toml)
    assert s.url == "http://dotenv:2" and s.sim.gpu == "L40S" and s.timeout_s == 5
    # env beats .env
    monkeypatch.setenv("PHASETOP_URL", "http://env:3")
    monkeypatch.setenv("PHASETOP_SIM__GPU", "H200")
    s = load_settings(toml)
    assert s.url == "http://env:3" and s.sim.gpu == "H200"
    # CLI beats env; a flag not given (None) does not override
    s = load_settings(toml, url="http://cli:4", api=None, **{"sim.gpu": "B200"})
    assert s.url == "http://cli:4" and s.api == "auto" and s.sim.gpu == "B200"


def test_api_key_is_secret(workdir, monkeypatch):
    monkeypatch.setenv("PHASETOP_API_KEY", "sk-very-secret")
    s = load_settings()
    assert s.api_key.get_secret_value() == "sk-very-secret"
    assert "sk-very-secret" not in repr(s) and "sk-very-secret" not in str(s.model_dump())


def test_default_toml_is_read_from_the_user_config_dir(workdir):
    (workdir / "xdg" / "phasetop").mkdir(parents=True)
    write_toml(workdir / "xdg" / "phasetop" / "config.toml", url="http://user-config:9")
    assert load_settings().url == "http://user-config:9"


def test_missing_explicit_config_file_is_an_error(workdir):
    with pytest.raises(FileNotFoundError):
        load_settings(str(workdir / "nope.toml"))


# Bad settings: one line naming the key and where it came from, raised at load.


def one_error(**kwargs) -> str:
    with pytest.raises(SettingsError) as caught:
        load_settings(**kwargs)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(("toml", "words"), [
    ("timout_s = 5\n", ["unknown setting 'timout_s' in", "c.toml", "(did you mean timeout_s?)"]),
    ("[sim]\ngpus = 'H200'\n", ["unknown setting 'sim.gpus'", "(did you mean sim.gpu?)"]),
    ("gpu = 'H200'\n", ["unknown setting 'gpu'", "(did you mean sim.gpu?)"]),
    ("[poll]\nmetrics_interval_s = 0\n", ["poll.metrics_interval_s in", "c.toml", "0.1"]),
    ("[poll]\ngpu_interval_s = -5\n", ["poll.gpu_interval_s in"]),
    ("[poll]\ngpu_interval_s = 0\n", ["poll.gpu_interval_s in"]),
    ("[poll]\nmetrics_window_s = 0.5\n", ["poll.metrics_window_s in", "c.toml", "greater than or equal to 1"]),
    ("[poll]\nmetrics_window_s = 7200\n", ["poll.metrics_window_s in", "less than or equal to 3600"]),
    ("[sim]\ntime_scale = 0\n", ["sim.time_scale in", "greater than 0"]),
    ("[sim]\ngpu = 'Z9000'\n", ["sim.gpu in", "unknown device 'Z9000'"]),
    ("[sim]\nmodel = 'huge-9000b'\n", ["sim.model in", "unknown model 'huge-9000b'"]),
    ("url = 'http://127.0.0.1:99999'\n", ["url in", "bad URL", "port out of range"]),
    ("url = 'localhost:8000'\n", ["url in", "bad URL 'localhost:8000': no scheme; did you mean http://localhost:8000?"]),
    ("timeout_s = nan\n", ["timeout_s in", "finite"]),
    ("timeout_s = \n", ["c.toml is not valid TOML", "line 1"]),
])
def test_a_bad_config_file_is_one_line_naming_the_key_and_the_file(workdir, toml, words):
    (workdir / "c.toml").write_text(toml)
    message = one_error(config_file=workdir / "c.toml")
    for word in words:
        assert word in message, message


@pytest.mark.parametrize(("env", "words"), [
    ({"PHASETOP_SIM__GPU": "Z9000"}, ["sim.gpu from PHASETOP_SIM__GPU", "unknown device 'Z9000'"]),
    ({"PHASETOP_SIM__TIME_SCALE": "0"}, ["sim.time_scale from PHASETOP_SIM__TIME_SCALE"]),
    ({"PHASETOP_URL": "http://127.0.0.1:99999"}, ["url from PHASETOP_URL", "bad URL 'http://127.0.0.1:99999'"]),
    ({"PHASETOP_TIMOUT_S": "5"}, ["unknown setting PHASETOP_TIMOUT_S in the environment (did you mean PHASETOP_TIMEOUT_S?)"]),
    ({"PHASETOP_SIM__GPUS": "H200"}, ["unknown setting PHASETOP_SIM__GPUS", "(did you mean PHASETOP_SIM__GPU?)"]),
])
def test_a_bad_variable_is_one_line_naming_it(workdir, monkeypatch, env, words):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    message = one_error()
    for word in words:
        assert word in message, message


def test_variables_far_from_any_setting_are_other_tools_and_left_alone(workdir, monkeypatch):
    monkeypatch.setenv("PHASETOP_DEBUG", "1")
    monkeypatch.setenv("PHASETOP_REAL_MODEL", "x")
    assert load_settings().url == "http://127.0.0.1:8000"


def test_a_bad_dotenv_line_names_the_dotenv_file(workdir):
    (workdir / ".env").write_text("PHASETOP_TIMOUT_S=5\n")
    assert str(workdir / ".env") in one_error()
    (workdir / ".env").write_text("PHASETOP_POLL__METRICS_INTERVAL_S=0\n")
    message = one_error()
    assert "from PHASETOP_POLL__METRICS_INTERVAL_S in" in message and str(workdir / ".env") in message


def test_a_flag_named_by_the_caller_is_the_one_blamed(workdir):
    with pytest.raises(SettingsError, match=r"^--time-scale: Input should be greater than 0$"):
        load_settings(None, {"sim.time_scale": "--time-scale"}, **{"sim.time_scale": 0})


def test_a_config_file_that_cannot_be_read_is_one_line_naming_it(workdir):
    """The default file as a directory (root reads any file, so a mode-000 file proves nothing as root)."""
    (workdir / "xdg" / "phasetop" / "config.toml").mkdir(parents=True)
    message = one_error()
    assert message.startswith("cannot read config file ") and "config.toml" in message


def test_the_example_file_loads_and_holds_the_defaults(workdir):
    defaults = Settings().model_dump()
    assert load_settings(EXAMPLE).model_dump() == defaults
    for key, value in flatten(tomllib.loads(EXAMPLE.read_text())).items():
        assert value == flatten(defaults)[key], key


def test_the_example_file_documents_every_setting(workdir):
    """Each key appears in its section, set (`key = default`) or, with no default, commented (`# key = ...`),
    followed by a comment line saying what it is."""
    lines = EXAMPLE.read_text().splitlines()
    section, documented = "", set()
    for number, line in enumerate(lines):
        if line.startswith("["):
            section = line.strip("[]") + "."
        elif " = " in line and not line.startswith("#  "):
            key = line.removeprefix("# ").split(" = ")[0]
            assert lines[number + 1].startswith("# "), f"{section}{key} has no comment line"
            documented.add(section + key)
    assert documented == set(leaves(Settings))


def flatten(data: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def leaves(model: type[BaseModel], prefix: str = "") -> list[str]:
    keys = []
    for name, field in model.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            keys += leaves(field.annotation, f"{prefix}{name}.")
        else:
            keys.append(prefix + name)
    return keys


def test_settings_however_made_register_their_secrets_for_redaction():
    from tui.core.untrusted import redact

    Settings(_env_file=None, api_key="sk-made-directly-42", url="http://bob:hunter22@127.0.0.1:8000")
    assert redact("Bearer sk-made-directly-42 at http://bob:hunter22@127.0.0.1:8000") == "Bearer *** at http://127.0.0.1:8000"
