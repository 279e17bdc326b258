import pytest


@pytest.fixture(autouse=True)
def colour(monkeypatch):
    """Snapshots are in colour whatever the shell says: Textual turns NO_COLOR into greys."""
    monkeypatch.delenv("NO_COLOR", raising=False)
