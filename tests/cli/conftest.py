"""Fixtures of the CLI tests."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """No stray .env, user config or PHASETOP_ variable; runs saved in the test's own dir."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for name in list(os.environ):
        if name.startswith("PHASETOP_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PHASETOP_RUNS_DIR", str(tmp_path / "runs"))
