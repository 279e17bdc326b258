"""What `phasetop` works out before the UI opens on its own simulator: the header label and the ceiling.
(`make demo` takes this path; the app tests hand the app a ceiling and skip it.)"""

from __future__ import annotations

import json

import pytest

from tui.app.launch import simulated_server
from tui.config import load_settings
from tui.core.hardware.server_ceiling import simulator_ceiling

TINY = {"hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 1000,
        "intermediate_size": 512, "_name_or_path": "tiny-test"}


@pytest.fixture(autouse=True)
def no_user_config(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for name in ("PHASETOP_SIM__MODEL", "PHASETOP_SIM__GPU", "PHASETOP_SIM__TIME_SCALE"):
        monkeypatch.delenv(name, raising=False)


def test_the_default_simulator_is_an_h100_with_the_8b_at_the_domains_ceiling():
    label, (ceiling, kv_bytes, weights) = simulated_server(load_settings(None))
    assert label == "simulated H100 SXM · Llama-3.1-8B"
    assert ceiling == pytest.approx(3350e9 / 16e9) and kv_bytes == 131072 and weights == 16e9


def test_a_slowed_simulator_on_a_users_config_json(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    label, (ceiling, _, weights) = simulated_server(load_settings(None, **{"sim.model": str(config), "sim.time_scale": 4}))
    assert label.endswith("· tiny-test · 4× slower")
    assert ceiling == pytest.approx(3350e9 / weights / 4)


def test_a_simulator_server_naming_a_file_is_not_read(tmp_path):
    """The flags a server publishes go to the presets only: a path in them is never opened."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    assert simulator_ceiling({"gpu": "H100 SXM", "model": str(config)}) is None
    assert simulator_ceiling({"gpu": "H100 SXM", "model": "8b"}).decode_ceiling_tok_s == pytest.approx(3350e9 / 16e9)
