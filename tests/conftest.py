"""Every test keeps the user's data dir untouched: the UI saves its sessions, the CLI its runs, by default there."""

import pytest

from tui.core.untrusted import forget_secrets


@pytest.fixture(autouse=True)
def data_dir_in_tmp(monkeypatch, tmp_path_factory):
    """XDG_DATA_HOME (where the default runs dir lives) in a temp dir; child processes inherit it."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data")))


@pytest.fixture(autouse=True)
def no_secrets_registered():
    """Settings register their key and URL credentials process-wide for redaction: each test starts with none,
    so one test's cannot redact another's output."""
    forget_secrets()
    yield
    forget_secrets()
