import pytest

from tui.config import load_settings


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
